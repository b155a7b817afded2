// The decode loop's remote ports on real verifier and drafter handlers: the draft port sends the
// drafter the committed ids it has not had, and all of them again when the drafter lost its
// session (it restarted), so that the suffix drafter drafts on as if nothing happened.
#include "services/orchestrator/remote_ports.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/engine/drafter_factory.h"
#include "gtest/gtest.h"
#include "tests/unit/common/engine/engine_fixture.h"
#include "tests/unit/services/orchestrator/pair_handlers.h"

namespace specd::orchestrator {
namespace {

class RemotePortsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { target_ = engine::testing::LoadTarget("qwen35-tiny-a"); }
  static void TearDownTestSuite() { target_.reset(); }
  void SetUp() override { ASSERT_NE(target_, nullptr); }

  // What each of `steps` steps of session `id` drafted after `prompt`; before step `lose_at`
  // (none: -1) the drafter releases the session, as a restart would lose it.
  static std::vector<std::vector<int64_t>> Drafted(verifier::VerifierApi& verifier,
                                                   drafter::DrafterHandler& drafter,
                                                   const std::string& id,
                                                   const std::vector<int64_t>& prompt, int steps,
                                                   int lose_at) {
    v1::PrefillRequest prefill = verifier::testing::PrefillRequestFor(id, prompt);
    prefill.set_max_session_length(256);
    absl::StatusOr<engine::DraftOptions> options = drafter.drafter().Resolve({});
    EXPECT_TRUE(options.ok()) << options.status();
    engine::RequestPorts ports = OpenRemotePorts(verifier, &drafter, prefill, *options);
    absl::StatusOr<engine::EmittedTokens> emitted = ports.target->Prefill();
    EXPECT_TRUE(emitted.ok()) << emitted.status();
    std::vector<std::vector<int64_t>> drafted;
    for (int step = 0; step < steps && emitted.ok(); ++step) {
      if (step == lose_at) {
        v1::DrafterServiceReleaseRequest release;
        release.set_session_id(id);
        EXPECT_TRUE(drafter.Release(release)->released());
      }
      absl::StatusOr<engine::Drafts> drafts = ports.draft->Propose(emitted->ids.back(), 15);
      EXPECT_TRUE(drafts.ok()) << "step " << step << ": " << drafts.status();
      if (!drafts.ok()) break;
      drafted.push_back(drafts->tokens);
      emitted = ports.target->Verify(*drafts);
      EXPECT_TRUE(emitted.ok()) << emitted.status();
    }
    return drafted;
  }

  static inline std::unique_ptr<model::Qwen35Model> target_;
};

TEST_F(RemotePortsTest, ADrafterThatLostTheSessionIsSentEveryIdAgainAndDraftsOn) {
  const std::shared_ptr<verifier::VerifierHandler> verifier = testing::PairVerifier(*target_);
  const std::shared_ptr<drafter::DrafterHandler> drafter =
      testing::PairDrafter(*target_, 8, nullptr, engine::kSuffixDrafter);
  ASSERT_TRUE(verifier != nullptr && drafter != nullptr);
  std::vector<int64_t> prompt = engine::testing::RandomPrompt(3, 10, target_->config().vocab_size);
  for (int i = 0; i < 30; ++i) prompt.push_back(prompt[i]);  // repeats itself: the suffix drafts

  constexpr int kSteps = 14;
  constexpr int kLoseAt = 8;
  const std::vector<std::vector<int64_t>> kept =
      Drafted(*verifier, *drafter, "kept", prompt, kSteps, -1);
  const std::vector<std::vector<int64_t>> lost =
      Drafted(*verifier, *drafter, "lost", prompt, kSteps, kLoseAt);
  EXPECT_EQ(lost, kept);
  ASSERT_EQ(kept.size(), size_t{kSteps});
  size_t drafted_after = 0;
  for (int step = kLoseAt; step < kSteps; ++step) drafted_after += kept[step].size();
  EXPECT_GT(drafted_after, 0u) << "the steps after the loss draft";
}

}  // namespace
}  // namespace specd::orchestrator
