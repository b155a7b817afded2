// The orchestrator's generation loop on each kind of pair — the engine's in-process ports (what
// `serve --role all` runs), the verifier and drafter handlers called directly, and the handlers
// over gRPC on loopback — which give the same output and statistics: it emits exactly what
// target-only decoding emits, streams what the unary call
// returns, survives losing the drafter, answers bad requests and overload with the contract's
// codes, frees its sessions however a request ends, and counts what happened per regime.
#include "services/orchestrator/generation_handler.h"

#include <ATen/ATen.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/engine/drafter_factory.h"
#include "common/engine/in_process_ports.h"
#include "common/metrics/exposition.h"
#include "common/rpc/grpc_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/vnni_gemm.h"
#include "services/drafter/drafter_grpc.h"
#include "services/drafter/drafter_handler.h"
#include "services/verifier/verifier_grpc.h"
#include "services/verifier/verifier_handler.h"
#include "tests/unit/common/engine/engine_fixture.h"
#include "tests/unit/services/orchestrator/pair_handlers.h"

namespace specd::orchestrator {
namespace {

using engine::testing::LoadTarget;
using engine::testing::RandomPrompt;
using ::testing::HasSubstr;

constexpr int64_t kNewTokens = 20;

class GenerationHandlerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { target_ = LoadTarget("qwen35-tiny-a").release(); }
  static void TearDownTestSuite() {
    delete target_;
    target_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(target_, nullptr);
    verifier_ = testing::PairVerifier(*target_);
    drafter_ = testing::PairDrafter(*target_);
    ASSERT_TRUE(verifier_ != nullptr && drafter_ != nullptr);
  }

  static OrchestratorOptions Options(int64_t max_running = 4, int64_t max_waiting = 4) {
    OrchestratorOptions options;
    options.model_name = "test";
    options.max_running = max_running;
    options.max_waiting = max_waiting;
    return options;
  }

  std::unique_ptr<GenerationHandler> Handler(BackendPair pair,
                                             const OrchestratorOptions& options = Options()) {
    absl::StatusOr<std::unique_ptr<BackendPool>> pool =
        BackendPool::Fixed(std::move(pair), absl::Seconds(5));
    EXPECT_TRUE(pool.ok()) << pool.status();
    if (!pool.ok()) return nullptr;
    pools_.push_back(*std::move(pool));
    absl::StatusOr<std::unique_ptr<GenerationHandler>> handler =
        GenerationHandler::Create(*pools_.back(), nullptr, registry_, options);
    EXPECT_TRUE(handler.ok()) << handler.status();
    return handler.ok() ? *std::move(handler) : nullptr;
  }

  // The engine's ports on the handlers' model and drafter (by default the DFlash one).
  std::unique_ptr<GenerationHandler> InProcess(
      const OrchestratorOptions& options = Options(),
      std::shared_ptr<drafter::DrafterHandler> drafter = nullptr) {
    if (drafter == nullptr) drafter = drafter_;
    return Handler(
        {.host = "in-process",
         .verifier = verifier_,
         .drafter = drafter,
         .in_process = std::make_shared<engine::InProcessPair>(*target_, &drafter->drafter())},
        options);
  }
  // The handlers' own sessions, called as the clients they implement.
  std::unique_ptr<GenerationHandler> Handlers(
      const OrchestratorOptions& options = Options(),
      std::shared_ptr<drafter::DrafterHandler> drafter = nullptr) {
    return Handler({.host = "handlers",
                    .verifier = verifier_,
                    .drafter = drafter == nullptr ? drafter_ : std::move(drafter)},
                   options);
  }

  static std::vector<int64_t> Prompt(int64_t length = 12) {
    return RandomPrompt(/*seed=*/length, length, target_->config().vocab_size);
  }

  static v1::GenerateRequest Request(const std::vector<int64_t>& prompt,
                                     int64_t max_new_tokens = kNewTokens, double temperature = 0,
                                     uint64_t seed = 1) {
    v1::GenerateRequest request;
    request.mutable_prompt()->mutable_token_ids()->mutable_ids()->Assign(prompt.begin(),
                                                                         prompt.end());
    request.mutable_sampling()->set_max_new_tokens(static_cast<uint32_t>(max_new_tokens));
    request.mutable_sampling()->set_temperature(static_cast<float>(temperature));
    request.mutable_sampling()->set_seed(seed);
    request.mutable_sampling()->set_ignore_eos(true);
    return request;
  }

  static std::vector<int64_t> TargetOnlyIds(const std::vector<int64_t>& prompt,
                                            double temperature = 0, uint64_t seed = 1) {
    return engine::testing::TargetOnly(
               *target_, engine::testing::Request(prompt, kNewTokens, temperature, seed))
        .ids;
  }

  // Lossless under load: what a request gives does not depend on what else runs. Sixteen requests
  // of mixed prompt lengths (some longer than a prefill chunk), block sizes (1: target-only, to the
  // drafter's 8), windows, temperatures, acceptance rules and stop rules, all at once on each kind
  // of pair, give what each gives alone, in forwards that batched them.
  void ExpectConcurrentRequestsGiveWhatEachGivesAlone();

  static std::vector<int64_t> Ids(const v1::GenerateResponse& response) {
    return {response.token_ids().begin(), response.token_ids().end()};
  }

  static bool Never() { return false; }

  // The same requests on `drafter` give the same on every kind of pair.
  void ExpectEveryPairAlike(const std::shared_ptr<drafter::DrafterHandler>& drafter);

  static inline model::Qwen35Model* target_ = nullptr;
  prometheus::Registry registry_;
  std::shared_ptr<verifier::VerifierHandler> verifier_;
  std::shared_ptr<drafter::DrafterHandler> drafter_;
  std::vector<std::unique_ptr<BackendPool>> pools_;
};

TEST_F(GenerationHandlerTest, GreedyOutputIsTheTargetsOwnWithAndWithoutSpeculation) {
  std::unique_ptr<GenerationHandler> handler = InProcess();
  const std::vector<int64_t> prompt = Prompt();
  for (const uint32_t block_size : {1u, 3u, 8u}) {
    v1::GenerateRequest request = Request(prompt);
    request.mutable_speculation()->set_block_size(block_size);
    absl::StatusOr<v1::GenerateResponse> response = handler->Generate(request, Never);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(Ids(*response), TargetOnlyIds(prompt)) << "block size " << block_size;
    EXPECT_EQ(response->finish_reason(), v1::FINISH_REASON_LENGTH);
    const v1::AcceptanceStats& acceptance = response->acceptance();
    if (block_size == 1) {
      EXPECT_EQ(acceptance.num_drafts(), 0u);
      EXPECT_EQ(acceptance.num_target_only_steps(), kNewTokens - 1);
    } else {
      EXPECT_GT(acceptance.num_drafts(), 0u);
      // The first token, then accepted + 1 per drafted step and 1 per step without drafts (the
      // last, where only one token fits).
      EXPECT_EQ(1 + acceptance.num_drafts() + acceptance.num_accepted_tokens() +
                    acceptance.num_target_only_steps(),
                kNewTokens);
      EXPECT_EQ(response->acceptance_lengths_size(), acceptance.num_drafts());
    }
  }
  EXPECT_EQ(verifier_->open_sessions(), 0u);
  EXPECT_EQ(drafter_->open_sessions(), 0u);
}

TEST_F(GenerationHandlerTest, SampledOutputIsTheTargetsSequenceForTheSameSeed) {
  std::unique_ptr<GenerationHandler> handler = InProcess();
  const std::vector<int64_t> prompt = Prompt();
  absl::StatusOr<v1::GenerateResponse> response =
      handler->Generate(Request(prompt, kNewTokens, /*temperature=*/1, /*seed=*/7), Never);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(Ids(*response), TargetOnlyIds(prompt, 1, 7));
  EXPECT_EQ(response->seed(), 7u);
}

TEST_F(GenerationHandlerTest, UnderRejectionSamplingGreedyStaysExactAndASeedRepeatsItsTokens) {
  OrchestratorOptions options = Options();
  options.rejection_sampling = true;
  std::unique_ptr<GenerationHandler> handler = InProcess(options);
  absl::StatusOr<v1::GetModelInfoResponse> info = handler->GetModelInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->default_speculation_params().draft_acceptance(),
            v1::DRAFT_ACCEPTANCE_REJECTION_SAMPLING);
  const std::vector<int64_t> prompt = Prompt();
  absl::StatusOr<v1::GenerateResponse> greedy = handler->Generate(Request(prompt), Never);
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  EXPECT_EQ(Ids(*greedy), TargetOnlyIds(prompt));
  // Sampled, with the blocks fixed: the drafts are drawn from (seed, position), so a seed gives
  // the same tokens again.
  v1::GenerateRequest sampled = Request(prompt, kNewTokens, /*temperature=*/1, /*seed=*/7);
  sampled.mutable_speculation()->set_block_size(4);
  absl::StatusOr<v1::GenerateResponse> first = handler->Generate(sampled, Never);
  absl::StatusOr<v1::GenerateResponse> again = handler->Generate(sampled, Never);
  ASSERT_TRUE(first.ok() && again.ok()) << first.status() << again.status();
  EXPECT_EQ(Ids(*first), Ids(*again));
  EXPECT_GT(first->acceptance().num_drafts(), 0u);
}

TEST_F(GenerationHandlerTest, LogprobsAreTheTargetsOwnForEveryEmittedToken) {
  std::unique_ptr<GenerationHandler> handler = InProcess();
  const std::vector<int64_t> prompt = Prompt();
  v1::GenerateRequest request = Request(prompt);
  request.mutable_sampling()->set_logprobs(true);
  request.mutable_sampling()->set_top_logprobs(3);
  absl::StatusOr<v1::GenerateResponse> response = handler->Generate(request, Never);
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->logprobs_size(), response->token_ids_size());
  // Greedy: each token is the most likely one, and its log-probability is the target's
  // log-softmax at that position (checked against a full forward of prompt + output).
  std::vector<int64_t> sequence = prompt;
  sequence.insert(sequence.end(), response->token_ids().begin(), response->token_ids().end());
  absl::StatusOr<model::Qwen35Cache> cache = target_->NewCache(sequence.size());
  ASSERT_TRUE(cache.ok());
  absl::StatusOr<model::ForwardOutput> forward = target_->Prefill(
      sequence, *cache, {.logit_rows = model::LogitRows::kAll, .hidden_states = {}});
  ASSERT_TRUE(forward.ok()) << forward.status();
  const at::Tensor expected = at::log_softmax(forward->logits, -1);
  for (int i = 0; i < response->logprobs_size(); ++i) {
    const v1::TokenLogprob& logprob = response->logprobs(i);
    EXPECT_EQ(logprob.token_id(), response->token_ids(i));
    ASSERT_EQ(logprob.top_logprobs_size(), 3);
    EXPECT_EQ(logprob.top_logprobs(0).token_id(), logprob.token_id());
    EXPECT_GE(logprob.top_logprobs(0).logprob(), logprob.top_logprobs(1).logprob());
    const int64_t row = static_cast<int64_t>(prompt.size()) + i - 1;
    EXPECT_NEAR(logprob.logprob(), expected[row][logprob.token_id()].item<float>(), 1e-3) << i;
  }
}

TEST_F(GenerationHandlerTest, StreamedDeltasAddUpToTheUnaryResponse) {
  std::unique_ptr<GenerationHandler> handler = InProcess();
  const v1::GenerateRequest request = Request(Prompt());
  absl::StatusOr<v1::GenerateResponse> unary = handler->Generate(request, Never);
  ASSERT_TRUE(unary.ok()) << unary.status();
  v1::GenerateStreamRequest stream_request;
  stream_request.ParseFromString(request.SerializeAsString());
  std::vector<v1::GenerateStreamResponse> messages;
  ASSERT_TRUE(handler
                  ->GenerateStream(stream_request, Never,
                                   [&](const v1::GenerateStreamResponse& message) {
                                     messages.push_back(message);
                                     return true;
                                   })
                  .ok());
  ASSERT_GE(messages.size(), 2u);
  std::vector<int64_t> ids;
  uint32_t lengths = 0;
  for (const v1::GenerateStreamResponse& message : messages) {
    ids.insert(ids.end(), message.token_ids().begin(), message.token_ids().end());
    lengths += message.acceptance_lengths_size();
  }
  EXPECT_EQ(ids, Ids(*unary));
  EXPECT_EQ(lengths, messages.back().acceptance().num_drafts());
  EXPECT_EQ(messages.back().finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(messages.front().finish_reason(), v1::FINISH_REASON_UNSPECIFIED);
  EXPECT_EQ(messages.back().usage().completion_tokens(), kNewTokens);
}

// The handlers behind real gRPC servers on loopback, reached through the gRPC clients.
class ServedPair {
 public:
  ServedPair(verifier::VerifierApi& verifier, drafter::DrafterApi& drafter)
      : verifier_service_(verifier), drafter_service_(drafter) {
    absl::StatusOr<rpc::GrpcServer> verifier_server =
        rpc::StartGrpcServer("127.0.0.1:0", {&verifier_service_}, {}, registry_);
    absl::StatusOr<rpc::GrpcServer> drafter_server =
        rpc::StartGrpcServer("127.0.0.1:0", {&drafter_service_}, {}, registry_);
    EXPECT_TRUE(verifier_server.ok() && drafter_server.ok());
    verifier_server_ = *std::move(verifier_server);
    drafter_server_ = *std::move(drafter_server);
    verifier_client_ = std::make_shared<verifier::GrpcVerifierClient>(
        Channel(verifier_server_.port), absl::Seconds(30));
    drafter_client_ = std::make_shared<drafter::GrpcDrafterClient>(Channel(drafter_server_.port),
                                                                   absl::Seconds(30));
  }

  static std::shared_ptr<grpc::Channel> Channel(int port) {
    return rpc::Connect("127.0.0.1:" + std::to_string(port));
  }

  BackendPair pair() const {
    return {.host = "loopback", .verifier = verifier_client_, .drafter = drafter_client_};
  }
  void StopDrafter() { drafter_server_.server->Shutdown(); }

 private:
  prometheus::Registry registry_;
  verifier::VerifierGrpcService verifier_service_;
  drafter::DrafterGrpcService drafter_service_;
  rpc::GrpcServer verifier_server_;
  rpc::GrpcServer drafter_server_;
  std::shared_ptr<verifier::GrpcVerifierClient> verifier_client_;
  std::shared_ptr<drafter::GrpcDrafterClient> drafter_client_;
};

// Each drafter — DFlash (reading the verifier's buffer), suffix (the committed ids) and the two
// combined — gives the same on every pair.
TEST_F(GenerationHandlerTest, EveryPairGivesTheSameOutputAndStatistics) {
  for (const std::string& source :
       {drafter::testing::FixtureDFlashDir(), std::string(engine::kSuffixDrafter),
        engine::kCombinedDrafterPrefix + drafter::testing::FixtureDFlashDir()}) {
    SCOPED_TRACE(source);
    ExpectEveryPairAlike(testing::PairDrafter(*target_, 8, nullptr, source));
  }
}

void GenerationHandlerTest::ExpectEveryPairAlike(
    const std::shared_ptr<drafter::DrafterHandler>& drafter) {
  ASSERT_NE(drafter, nullptr);
  ServedPair served(*verifier_, *drafter);
  // Full blocks every step: the guard's choices follow measured times, which differ by pair.
  OrchestratorOptions options = Options();
  options.speculation_guard = false;
  std::unique_ptr<GenerationHandler> in_process = InProcess(options, drafter);
  std::unique_ptr<GenerationHandler> handlers = Handlers(options, drafter);
  std::unique_ptr<GenerationHandler> over_grpc = Handler(served.pair(), options);
  // A prompt that repeats itself, so that the suffix drafter drafts from the first step.
  std::vector<int64_t> prompt = Prompt(10);
  for (int i = 0; i < 20; ++i) prompt.push_back(prompt[i]);
  for (const auto& [temperature, acceptance] :
       {std::pair(0.0, v1::DRAFT_ACCEPTANCE_MATCH), std::pair(1.0, v1::DRAFT_ACCEPTANCE_MATCH),
        std::pair(1.0, v1::DRAFT_ACCEPTANCE_REJECTION_SAMPLING)}) {
    v1::GenerateRequest request = Request(prompt, kNewTokens, temperature, /*seed=*/5);
    request.mutable_speculation()->set_draft_acceptance(acceptance);
    request.mutable_sampling()->set_logprobs(true);
    request.mutable_sampling()->set_top_logprobs(2);
    absl::StatusOr<v1::GenerateResponse> expected = in_process->Generate(request, Never);
    ASSERT_TRUE(expected.ok()) << expected.status();
    EXPECT_GT(expected->acceptance().num_drafts(), 0u);
    for (GenerationHandler* other : {handlers.get(), over_grpc.get()}) {
      absl::StatusOr<v1::GenerateResponse> response = other->Generate(request, Never);
      ASSERT_TRUE(response.ok()) << response.status();
      EXPECT_EQ(Ids(*response), Ids(*expected))
          << "temperature " << temperature << ", acceptance " << acceptance;
      EXPECT_EQ(response->acceptance().SerializeAsString(),
                expected->acceptance().SerializeAsString());
      ASSERT_EQ(response->logprobs_size(), expected->logprobs_size());
      for (int i = 0; i < response->logprobs_size(); ++i) {
        EXPECT_NEAR(response->logprobs(i).logprob(), expected->logprobs(i).logprob(), 1e-5);
      }
    }
  }
}

void GenerationHandlerTest::ExpectConcurrentRequestsGiveWhatEachGivesAlone() {
  constexpr int kRequests = 16;
  const std::shared_ptr<verifier::VerifierHandler> verifier =
      testing::PairVerifier(*target_, /*max_session_length=*/1024, /*max_sessions=*/2 * kRequests);
  const std::shared_ptr<drafter::DrafterHandler> drafter =
      testing::PairDrafter(*target_, /*max_sessions=*/2 * kRequests);
  const auto in_process = std::make_shared<engine::InProcessPair>(*target_, &drafter->drafter());
  ServedPair served(*verifier, *drafter);
  const OrchestratorOptions options = Options(kRequests, kRequests);
  struct Path {
    std::string name;
    std::unique_ptr<GenerationHandler> handler;
    std::function<engine::BatchingStats()> target_batches, draft_batches;
  };
  std::vector<Path> paths;
  paths.push_back({"in-process",
                   Handler({.host = "in-process",
                            .verifier = verifier,
                            .drafter = drafter,
                            .in_process = in_process},
                           options),
                   [&] { return in_process->target_stats(); },
                   [&] { return in_process->drafter_stats(); }});
  for (auto [name, pair] :
       {std::pair<std::string, BackendPair>(
            "handlers", {.host = "handlers", .verifier = verifier, .drafter = drafter}),
        std::pair<std::string, BackendPair>("gRPC", served.pair())}) {
    paths.push_back({name, Handler(std::move(pair), options),
                     [&] { return verifier->batching_stats(); },
                     [&] { return drafter->batching_stats(); }});
  }

  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < kRequests; ++i) {
    const int64_t prompt_length = std::vector<int64_t>{7, 40, 130, 600}[i % 4] + i;
    v1::GenerateRequest request =
        Request(Prompt(prompt_length), /*max_new_tokens=*/10 + 3 * (i % 5),
                /*temperature=*/i % 3 == 2 ? 1.0 : 0.0, /*seed=*/i + 1);
    request.mutable_speculation()->set_block_size(std::vector<uint32_t>{1, 2, 5, 8}[i % 4]);
    if (i % 5 == 1) request.mutable_speculation()->set_draft_window(6);
    if (i % 6 == 2) {
      request.mutable_speculation()->set_draft_acceptance(v1::DRAFT_ACCEPTANCE_REJECTION_SAMPLING);
    }
    if (i % 6 == 5) request.mutable_sampling()->add_stop_token_ids(static_cast<uint32_t>(i * 7));
    requests.push_back(std::move(request));
  }
  // The mean batch size of the steps between two readings.
  const auto mean_batch = [](const engine::BatchingStats& before,
                             const engine::BatchingStats& after) {
    return static_cast<double>(after.sequences - before.sequences) /
           static_cast<double>(std::max<int64_t>(1, after.steps - before.steps));
  };
  for (Path& path : paths) {
    std::vector<v1::GenerateResponse> alone;
    for (const v1::GenerateRequest& request : requests) {
      absl::StatusOr<v1::GenerateResponse> response = path.handler->Generate(request, Never);
      ASSERT_TRUE(response.ok()) << path.name << ": " << response.status();
      alone.push_back(*std::move(response));
    }
    const engine::BatchingStats target_before = path.target_batches();
    const engine::BatchingStats draft_before = path.draft_batches();
    std::vector<absl::StatusOr<v1::GenerateResponse>> together(kRequests, absl::UnknownError(""));
    std::vector<std::thread> clients;
    for (int i = 0; i < kRequests; ++i) {
      clients.emplace_back([&, i] { together[i] = path.handler->Generate(requests[i], Never); });
    }
    for (std::thread& client : clients) client.join();
    for (int i = 0; i < kRequests; ++i) {
      ASSERT_TRUE(together[i].ok())
          << path.name << " request " << i << ": " << together[i].status();
      EXPECT_EQ(Ids(*together[i]), Ids(alone[i])) << path.name << " request " << i;
      EXPECT_EQ(together[i]->finish_reason(), alone[i].finish_reason()) << path.name << " " << i;
    }
    EXPECT_GT(mean_batch(target_before, path.target_batches()), 2) << path.name;
    EXPECT_GT(mean_batch(draft_before, path.draft_batches()), 2) << path.name;
  }
  // Greedy output is target-only output.
  const std::vector<int64_t> greedy_prompt = Prompt(41);
  absl::StatusOr<v1::GenerateResponse> greedy =
      paths.front().handler->Generate(Request(greedy_prompt), Never);
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  EXPECT_EQ(Ids(*greedy), TargetOnlyIds(greedy_prompt));
}

TEST_F(GenerationHandlerTest, ConcurrentRequestsGiveWhatEachGivesAlone) {
  ExpectConcurrentRequestsGiveWhatEachGivesAlone();
}

// The same on the W4A16 fixture served on int8 activations with the int8 head (W4A8, the fastest
// CPU mode): its kernels round and sum each row on its own, so batching changes no output there
// either.
class W4A8GenerationHandlerTest : public GenerationHandlerTest {
 protected:
  static void SetUpTestSuite() {
    if (kernels::cpu::BestVnniGemmIsa() == kernels::cpu::VnniGemmIsa::kNone) return;
    target_ = LoadTarget("qwen35-tiny-a-w4a16", {.int4_activations = quant::Int4Activations::kInt8,
                                                 .head = model::HeadWeights::kInt8})
                  .release();
  }
  void SetUp() override {
    if (kernels::cpu::BestVnniGemmIsa() == kernels::cpu::VnniGemmIsa::kNone) {
      GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512 VNNI";
    }
    GenerationHandlerTest::SetUp();
  }
};

TEST_F(W4A8GenerationHandlerTest, ConcurrentRequestsGiveWhatEachGivesAlone) {
  ExpectConcurrentRequestsGiveWhatEachGivesAlone();
}

TEST_F(GenerationHandlerTest, RequestsBeyondTheMemoryBudgetWaitAndGiveWhatEachGivesAlone) {
  constexpr int kRequests = 8;
  constexpr int64_t kMaxNew = 12;
  const std::vector<int64_t> prompt_lengths = {7, 40, 130, 300};
  // One memory budget for the verifier, the drafter and the in-process pair (as `serve --role
  // all` has): room for the two longest requests at once, target and drafter sessions, not more.
  const model::CacheFootprint request_footprint =
      target_->SequenceFootprint() + drafter_->drafter().SessionFootprint();
  const int64_t longest_blocks = (prompt_lengths.back() + kRequests + kMaxNew + 15) / 16;
  std::vector<engine::CachePoolUse> uses;
  std::mutex uses_mutex;
  std::unique_ptr<engine::CachePool> pool =
      *engine::CachePool::Create({.budget_bytes = 2 * request_footprint.Bytes(16 * longest_blocks),
                                  .block_tokens = 16,
                                  .max_waiting = kRequests},
                                 [&](const engine::CachePoolUse& use) {
                                   std::lock_guard lock(uses_mutex);
                                   uses.push_back(use);
                                 });
  const std::shared_ptr<verifier::VerifierHandler> verifier = testing::PairVerifier(
      *target_, /*max_session_length=*/1024, /*max_sessions=*/2 * kRequests, pool.get());
  const std::shared_ptr<drafter::DrafterHandler> drafter =
      testing::PairDrafter(*target_, /*max_sessions=*/2 * kRequests, pool.get());
  ServedPair served(*verifier, *drafter);
  const OrchestratorOptions options = Options(kRequests, kRequests);
  std::vector<std::pair<std::string, std::unique_ptr<GenerationHandler>>> paths;
  paths.emplace_back(
      "in-process",
      Handler({.host = "in-process",
               .verifier = verifier,
               .drafter = drafter,
               .in_process = std::make_shared<engine::InProcessPair>(
                   *target_, &drafter->drafter(), engine::PairOptions{.cache_pool = pool.get()})},
              options));
  paths.emplace_back(
      "handlers", Handler({.host = "handlers", .verifier = verifier, .drafter = drafter}, options));
  paths.emplace_back("gRPC", Handler(served.pair(), options));

  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < kRequests; ++i) {
    v1::GenerateRequest request = Request(Prompt(prompt_lengths[i % 4] + i), kMaxNew,
                                          /*temperature=*/i % 3 == 2 ? 1.0 : 0.0, /*seed=*/i + 1);
    request.mutable_speculation()->set_block_size(i % 2 == 0 ? 4 : 1);
    requests.push_back(std::move(request));
  }
  for (auto& [name, handler] : paths) {
    std::vector<v1::GenerateResponse> alone;
    for (const v1::GenerateRequest& request : requests) {
      absl::StatusOr<v1::GenerateResponse> response = handler->Generate(request, Never);
      ASSERT_TRUE(response.ok()) << name << ": " << response.status();
      alone.push_back(*std::move(response));
    }
    {
      std::lock_guard lock(uses_mutex);
      uses.clear();
    }
    std::vector<absl::StatusOr<v1::GenerateResponse>> together(kRequests, absl::UnknownError(""));
    std::vector<std::thread> clients;
    for (int i = 0; i < kRequests; ++i) {
      clients.emplace_back([&, i] { together[i] = handler->Generate(requests[i], Never); });
    }
    for (std::thread& client : clients) client.join();
    for (int i = 0; i < kRequests; ++i) {
      ASSERT_TRUE(together[i].ok()) << name << " request " << i << ": " << together[i].status();
      EXPECT_EQ(Ids(*together[i]), Ids(alone[i])) << name << " request " << i;
    }
    std::lock_guard lock(uses_mutex);
    const auto most = [&](auto field) {
      int64_t top = 0;
      for (const engine::CachePoolUse& use : uses) top = std::max(top, use.*field);
      return top;
    };
    EXPECT_LE(most(&engine::CachePoolUse::used_bytes), pool->use().capacity_bytes) << name;
    EXPECT_GE(most(&engine::CachePoolUse::waiting), 1) << name << ": nobody waited for memory";
    EXPECT_GE(most(&engine::CachePoolUse::sequences), 2) << name;
    EXPECT_EQ(pool->use().used_bytes, 0) << name << ": every session gave its memory back";
  }
}

TEST_F(GenerationHandlerTest, ARequestLargerThanTheMemoryBudgetIsResourceExhausted) {
  std::unique_ptr<engine::CachePool> pool =
      *engine::CachePool::Create({.budget_bytes = target_->SequenceFootprint().Bytes(64),
                                  .block_tokens = 16,
                                  .max_waiting = 4});
  const std::shared_ptr<verifier::VerifierHandler> verifier =
      testing::PairVerifier(*target_, /*max_session_length=*/256, /*max_sessions=*/8, pool.get());
  const std::vector<std::unique_ptr<GenerationHandler>> handlers = [&] {
    std::vector<std::unique_ptr<GenerationHandler>> made;
    made.push_back(
        Handler({.host = "in-process",
                 .verifier = verifier,
                 .drafter = nullptr,
                 .in_process = std::make_shared<engine::InProcessPair>(
                     *target_, nullptr, engine::PairOptions{.cache_pool = pool.get()})}));
    made.push_back(Handler({.host = "handlers", .verifier = verifier, .drafter = nullptr}));
    return made;
  }();
  for (const std::unique_ptr<GenerationHandler>& handler : handlers) {
    const absl::StatusOr<v1::GenerateResponse> response =
        handler->Generate(Request(Prompt(100)), Never);
    EXPECT_EQ(response.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(response.status().message(), HasSubstr("cache memory"));
    // One that fits still runs.
    EXPECT_TRUE(handler->Generate(Request(Prompt(20)), Never).ok());
  }
  EXPECT_EQ(verifier->open_sessions(), 0u);
  EXPECT_EQ(pool->use().used_bytes, 0);
}

TEST_F(GenerationHandlerTest, ALostDrafterCostsSpeedNotTheRequest) {
  ServedPair served(*verifier_, *drafter_);
  std::unique_ptr<GenerationHandler> handler = Handler(served.pair());
  served.StopDrafter();
  const std::vector<int64_t> prompt = Prompt();
  absl::StatusOr<v1::GenerateResponse> response = handler->Generate(Request(prompt), Never);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(Ids(*response), TargetOnlyIds(prompt));
  EXPECT_EQ(response->acceptance().num_target_only_steps(), kNewTokens - 1);
  EXPECT_THAT(metrics::Exposition(registry_),
              HasSubstr("specd_drafter_fallbacks_total{model=\"test\"} 1\n"));
}

TEST_F(GenerationHandlerTest, BadRequestsAreInvalidArgumentsNamingTheField) {
  std::unique_ptr<GenerationHandler> handler = InProcess();
  const int64_t vocab = target_->config().vocab_size;
  struct Case {
    const char* what;
    v1::GenerateRequest request;
    const char* message;
  };
  std::vector<Case> cases;
  cases.push_back({"empty prompt", Request({}), "prompt"});
  cases.push_back({"id outside the vocabulary", Request({1, vocab}), "vocabulary"});
  cases.push_back({"text without a tokenizer", v1::GenerateRequest(), "prompt"});
  cases.back().request.mutable_prompt()->set_text("hello");
  cases.push_back({"over-long prompt", Request(std::vector<int64_t>(256, 1)), "prompt"});
  cases.push_back({"temperature", Request(Prompt()), "temperature"});
  cases.back().request.mutable_sampling()->set_temperature(-1);
  cases.push_back({"max_new_tokens", Request(Prompt(), 0), "max_new_tokens"});
  cases.push_back({"block size", Request(Prompt()), "block_size"});
  cases.back().request.mutable_speculation()->set_block_size(99);
  cases.push_back({"empty stop string", Request(Prompt()), "stop"});
  cases.back().request.mutable_sampling()->add_stop("");
  cases.push_back({"acceptance rule", Request(Prompt()), "draft_acceptance"});
  cases.back().request.mutable_speculation()->set_draft_acceptance(
      static_cast<v1::DraftAcceptance>(7));
  for (const Case& bad : cases) {
    absl::StatusOr<v1::GenerateResponse> response = handler->Generate(bad.request, Never);
    EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << bad.what;
    EXPECT_THAT(response.status().message(), HasSubstr(bad.message)) << bad.what;
  }
  EXPECT_EQ(verifier_->open_sessions(), 0u);
}

TEST_F(GenerationHandlerTest, BeforeAPairJoinsRequestsAreUnavailable) {
  std::unique_ptr<BackendPool> empty = BackendPool::Discovered(
      [] { return absl::StatusOr<std::vector<std::string>>(std::vector<std::string>{}); },
      [](const std::string& host) {
        return BackendPair{.host = host, .verifier = nullptr, .drafter = nullptr};
      },
      absl::Seconds(5));
  absl::StatusOr<std::unique_ptr<GenerationHandler>> handler =
      GenerationHandler::Create(*empty, nullptr, registry_, Options());
  ASSERT_TRUE(handler.ok()) << handler.status();
  EXPECT_EQ((*handler)->Generate(Request(Prompt()), Never).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ((*handler)->GetModelInfo().status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(GenerationHandlerTest, ModelInfoDescribesThePairsTargetAndDrafter) {
  absl::StatusOr<v1::GetModelInfoResponse> info = InProcess()->GetModelInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->vocab_size(), target_->config().vocab_size);
  EXPECT_EQ(info->max_context_length(), 256u);
  EXPECT_EQ(info->drafter_block_size(), drafter_->drafter().block_size());
  EXPECT_EQ(info->default_speculation_params().block_size(), info->drafter_block_size());
}

TEST_F(GenerationHandlerTest, BeyondTheQueueRequestsAreRefusedAtOnce) {
  std::unique_ptr<GenerationHandler> handler = InProcess(Options(/*max_running=*/1, 0));
  v1::GenerateStreamRequest first;
  first.ParseFromString(Request(Prompt()).SerializeAsString());
  absl::Status refused;
  // The first request holds the only slot while its first message is being written.
  ASSERT_TRUE(handler
                  ->GenerateStream(first, Never,
                                   [&](const v1::GenerateStreamResponse&) {
                                     if (refused.ok()) {
                                       refused =
                                           handler->Generate(Request(Prompt()), Never).status();
                                     }
                                     return true;
                                   })
                  .ok());
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(handler->Generate(Request(Prompt()), Never).ok());
}

TEST_F(GenerationHandlerTest, AbortEndsTheRequestWithWhatItHasAndFreesTheSessions) {
  for (const std::unique_ptr<GenerationHandler>& handler : {InProcess(), Handlers()}) {
    v1::GenerateStreamRequest request;
    request.ParseFromString(Request(Prompt()).SerializeAsString());
    request.set_request_id("to-abort");
    std::vector<v1::GenerateStreamResponse> messages;
    ASSERT_TRUE(handler
                    ->GenerateStream(request, Never,
                                     [&](const v1::GenerateStreamResponse& message) {
                                       messages.push_back(message);
                                       v1::AbortRequest abort;
                                       abort.set_request_id("to-abort");
                                       handler->Abort(abort);
                                       return true;
                                     })
                    .ok());
    ASSERT_FALSE(messages.empty());
    EXPECT_EQ(messages.back().finish_reason(), v1::FINISH_REASON_ABORT);
    EXPECT_LT(messages.back().usage().completion_tokens(), kNewTokens);
    EXPECT_EQ(verifier_->open_sessions(), 0u);
    EXPECT_EQ(drafter_->open_sessions(), 0u);
    v1::AbortRequest unknown;
    unknown.set_request_id("to-abort");
    EXPECT_FALSE(handler->Abort(unknown).aborted());
  }
}

TEST_F(GenerationHandlerTest, ACancelledClientStopsTheRequestAndFreesTheSessions) {
  for (const std::unique_ptr<GenerationHandler>& handler : {InProcess(), Handlers()}) {
    v1::GenerateStreamRequest request;
    request.ParseFromString(Request(Prompt()).SerializeAsString());
    bool cancelled = false;
    absl::Status status = handler->GenerateStream(
        request, [&] { return cancelled; },
        [&](const v1::GenerateStreamResponse&) {
          cancelled = true;
          return true;
        });
    EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
    EXPECT_EQ(verifier_->open_sessions(), 0u);
    EXPECT_EQ(drafter_->open_sessions(), 0u);
  }
}

TEST_F(GenerationHandlerTest, MetricsCountDraftsAndLatencyPerRegime) {
  std::unique_ptr<GenerationHandler> handler = InProcess();
  absl::StatusOr<v1::GenerateResponse> response = handler->Generate(Request(Prompt()), Never);
  ASSERT_TRUE(response.ok()) << response.status();
  const std::string exposition = metrics::Exposition(registry_);
  EXPECT_THAT(exposition,
              HasSubstr("specd_spec_decode_num_drafts_total{model=\"test\",regime=\"short\"} " +
                        std::to_string(response->acceptance().num_drafts()) + "\n"));
  EXPECT_THAT(exposition, HasSubstr("specd_time_to_first_token_seconds_count{model=\"test\","
                                    "regime=\"short\"} 1\n"));
  EXPECT_THAT(exposition, HasSubstr("specd_request_success_total{finished_reason=\"length\","
                                    "model=\"test\",regime=\"short\"} 1\n"));
  EXPECT_THAT(exposition, HasSubstr("specd_num_requests_running{model=\"test\"} 0\n"));
  // Drafted positions have their series even when nothing there was accepted (a random drafter).
  const v1::AcceptanceStats& acceptance = response->acceptance();
  const int accepted_first =
      acceptance.accepted_per_position_size() > 0 ? acceptance.accepted_per_position(0) : 0;
  EXPECT_THAT(exposition,
              HasSubstr("specd_spec_decode_num_accepted_tokens_per_pos_total{model=\"test\","
                        "position=\"0\",regime=\"short\"} " +
                        std::to_string(accepted_first) + "\n"));
}

TEST_F(GenerationHandlerTest, TheGuardChoosesEveryStepOfARequestThatNamesNoBlock) {
  int64_t guarded_steps = 0;
  for (const std::unique_ptr<GenerationHandler>& handler : {InProcess(), Handlers()}) {
    const v1::GenerateRequest request = Request(Prompt());
    absl::StatusOr<v1::GenerateResponse> guarded = handler->Generate(request, Never);
    ASSERT_TRUE(guarded.ok()) << guarded.status();
    EXPECT_EQ(Ids(*guarded), TargetOnlyIds(Prompt()));
    guarded_steps +=
        guarded->acceptance().num_drafts() + guarded->acceptance().num_target_only_steps();
    // A request that names its block keeps it: every step drafts.
    v1::GenerateRequest fixed = request;
    fixed.mutable_speculation()->set_block_size(4);
    absl::StatusOr<v1::GenerateResponse> unguarded = handler->Generate(fixed, Never);
    ASSERT_TRUE(unguarded.ok()) << unguarded.status();
    EXPECT_EQ(Ids(*unguarded), Ids(*guarded));
    EXPECT_EQ(unguarded->acceptance().num_drafts(), unguarded->acceptance_lengths_size());
  }
  // Every step of the guarded requests was the guard's choice, on both pairs; no fixed one was.
  const std::string exposition = metrics::Exposition(registry_);
  EXPECT_THAT(exposition,
              HasSubstr("specd_guard_block_size_count{model=\"test\",regime=\"short\"} " +
                        std::to_string(guarded_steps) + "\n"));
  EXPECT_THAT(exposition,
              HasSubstr("specd_guard_expected_speedup{model=\"test\",regime=\"short\"}"));
}

}  // namespace
}  // namespace specd::orchestrator
