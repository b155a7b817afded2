// The orchestrator's verifier + drafter pairs: a request goes to the pair with the fewest requests
// in flight; discovered hosts join once their verifier answers and serves the same target, and
// leave when they are no longer listed, their running requests finishing on them.
#include "services/orchestrator/backend_pool.h"

#include <prometheus/registry.h>

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/rpc/grpc_server.h"
#include "gtest/gtest.h"
#include "services/verifier/verifier_grpc.h"
#include "tests/unit/services/orchestrator/pair_handlers.h"

namespace specd::orchestrator {
namespace {

class BackendPoolTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { target_ = engine::testing::LoadTarget("qwen35-tiny-a").release(); }
  static void TearDownTestSuite() {
    delete target_;
    target_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(target_, nullptr); }

  // A pool over the hosts in `listed_`, each host's pair made in process on first sight.
  std::unique_ptr<BackendPool> Discovered() {
    return BackendPool::Discovered(
        [this]() -> absl::StatusOr<std::vector<std::string>> { return listed_; },
        [this](const std::string& host) {
          if (!pairs_.contains(host)) {
            pairs_[host] = {.host = host,
                            .verifier = testing::PairVerifier(*target_),
                            .drafter = testing::PairDrafter(*target_)};
          }
          return pairs_[host];
        },
        absl::Seconds(5));
  }

  static inline model::Qwen35Model* target_ = nullptr;
  std::vector<std::string> listed_;
  std::map<std::string, BackendPair> pairs_;
};

TEST_F(BackendPoolTest, ARequestGoesToThePairWithTheFewestInFlight) {
  listed_ = {"a", "b"};
  std::unique_ptr<BackendPool> pool = Discovered();
  ASSERT_TRUE(pool->Refresh().ok());
  ASSERT_EQ(pool->size(), 2u);
  absl::StatusOr<BackendPool::Lease> first = pool->Acquire();
  absl::StatusOr<BackendPool::Lease> second = pool->Acquire();
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE(&first->verifier(), &second->verifier());
  // Each lease holds its verifier's own drafter: the two share a host.
  for (const BackendPool::Lease* lease : {&*first, &*second}) {
    const BackendPair& pair =
        &lease->verifier() == pairs_["a"].verifier.get() ? pairs_["a"] : pairs_["b"];
    EXPECT_EQ(lease->drafter(), pair.drafter.get());
    ASSERT_TRUE(lease->drafter_info().has_value());
  }
  verifier::VerifierApi* freed = &first->verifier();
  { BackendPool::Lease done = *std::move(first); }
  absl::StatusOr<BackendPool::Lease> third = pool->Acquire();
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(&third->verifier(), freed);
}

TEST_F(BackendPoolTest, HostsJoinWhenListedAndLeaveWhenNotWhileTheirRequestsFinish) {
  std::unique_ptr<BackendPool> pool = Discovered();
  ASSERT_TRUE(pool->Refresh().ok());
  EXPECT_FALSE(pool->target().has_value());
  EXPECT_EQ(pool->Acquire().status().code(), absl::StatusCode::kUnavailable);

  listed_ = {"a"};
  ASSERT_TRUE(pool->Refresh().ok());
  ASSERT_TRUE(pool->target().has_value());
  EXPECT_EQ(pool->target()->vocab_size(), target_->config().vocab_size);
  absl::StatusOr<BackendPool::Lease> running = pool->Acquire();
  ASSERT_TRUE(running.ok());

  listed_ = {"b"};
  ASSERT_TRUE(pool->Refresh().ok());
  EXPECT_EQ(pool->size(), 1u);
  absl::StatusOr<BackendPool::Lease> next = pool->Acquire();
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(&next->verifier(), pairs_["b"].verifier.get());
  // The request that started on "a" still reaches it.
  EXPECT_EQ(&running->verifier(), pairs_["a"].verifier.get());
  EXPECT_TRUE(running->verifier().Info().ok());
}

TEST_F(BackendPoolTest, AHostWhoseVerifierDoesNotAnswerJoinsOnceItDoes) {
  prometheus::Registry registry;
  std::shared_ptr<verifier::VerifierHandler> handler = testing::PairVerifier(*target_);
  verifier::VerifierGrpcService service(*handler);
  // A port that nothing listens on yet: bind, note it, and serve there only later.
  absl::StatusOr<rpc::GrpcServer> probe = rpc::StartGrpcServer("127.0.0.1:0", {}, {}, registry);
  ASSERT_TRUE(probe.ok());
  const std::string address = "127.0.0.1:" + std::to_string(probe->port);
  probe->server->Shutdown();
  probe->server.reset();
  const BackendPair remote = {.host = address,
                              .verifier = std::make_shared<verifier::GrpcVerifierClient>(
                                  rpc::Connect(address), absl::Seconds(5)),
                              .drafter = nullptr};
  std::unique_ptr<BackendPool> pool = BackendPool::Discovered(
      [&]() -> absl::StatusOr<std::vector<std::string>> { return std::vector{address}; },
      [&](const std::string&) { return remote; }, absl::Seconds(5));
  ASSERT_TRUE(pool->Refresh().ok());
  EXPECT_EQ(pool->size(), 0u);

  absl::StatusOr<rpc::GrpcServer> server = rpc::StartGrpcServer(address, {&service}, {}, registry);
  ASSERT_TRUE(server.ok()) << server.status();
  // The channel waits out its reconnect backoff (about a second) before it tries again.
  for (int i = 0; i < 100 && pool->size() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_TRUE(pool->Refresh().ok());
  }
  EXPECT_EQ(pool->size(), 1u);
  absl::StatusOr<BackendPool::Lease> lease = pool->Acquire();
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->drafter(), nullptr);
  EXPECT_FALSE(lease->drafter_info().has_value());
}

TEST_F(BackendPoolTest, AVerifierServingAnotherTargetIsNotUsed) {
  listed_ = {"a", "other"};
  pairs_["other"] = {.host = "other",
                     .verifier = testing::PairVerifier(*target_, /*max_session_length=*/128),
                     .drafter = nullptr};
  std::unique_ptr<BackendPool> pool = Discovered();
  ASSERT_TRUE(pool->Refresh().ok());
  EXPECT_EQ(pool->size(), 1u);
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<BackendPool::Lease> lease = pool->Acquire();
    ASSERT_TRUE(lease.ok());
    EXPECT_EQ(&lease->verifier(), pairs_["a"].verifier.get());
  }
}

TEST_F(BackendPoolTest, AFixedPairNeedsItsVerifierNow) {
  const std::string nowhere = "127.0.0.1:1";
  absl::StatusOr<std::unique_ptr<BackendPool>> pool =
      BackendPool::Fixed({.host = nowhere,
                          .verifier = std::make_shared<verifier::GrpcVerifierClient>(
                              rpc::Connect(nowhere), absl::Seconds(2)),
                          .drafter = nullptr},
                         absl::Seconds(5));
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(pool.status().message().find("cannot be reached"), std::string::npos);
}

}  // namespace
}  // namespace specd::orchestrator
