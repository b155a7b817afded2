// The DFlash drafter service (drafter.proto) on the dflash-tiny-a drafter and the context buffers
// of a qwen35-tiny-a verifier: drafting through the service proposes exactly what in-process
// drafting proposes on the same context, with the block size, window and confidence cut the
// request asks for; it follows the buffer's rows (new, skipped or rewritten) and generations;
// sessions end on Release or after their idle timeout; refusals carry the contract's codes.
#include "services/drafter/drafter_handler.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/rpc/context_buffer.h"
#include "common/rpc/proto_duration.h"
#include "gtest/gtest.h"
#include "services/drafter/mapped_context.h"
#include "services/verifier/verifier_handler.h"
#include "tests/unit/common/engine/engine_fixture.h"
#include "tests/unit/services/drafter/drafter_fixture.h"
#include "tests/unit/services/verifier/verifier_fixture.h"

namespace specd::drafter {
namespace {

using testing::DraftRequestFor;
using testing::InProcessDrafter;
using testing::InProcessDrafting;
using testing::VerifiedDrafting;
using verifier::testing::Ids;
using verifier::testing::PrefillRequestFor;
using verifier::testing::TappedHiddenStates;
using verifier::testing::VerifyRequestFor;

constexpr int64_t kTrainedBlock = 8;  // dflash-tiny-a's block_size
constexpr int64_t kMaxLength = 128;
const std::vector<int64_t> kTaps = {0, 2};  // dflash-tiny-a's target_layer_ids

class DrafterHandlerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { target_ = engine::testing::LoadTarget("qwen35-tiny-a"); }
  static void TearDownTestSuite() { target_.reset(); }
  void SetUp() override { ASSERT_NE(target_, nullptr); }

  static const model::Qwen35Model& Target() { return *target_; }
  static int64_t Vocab() { return Target().config().vocab_size; }

  static DrafterOptions Options() {
    DrafterOptions options;
    options.model_name = "dflash-tiny-a";
    options.quantization = "dense";
    options.default_window = 0;
    options.max_sessions = 8;
    options.session_idle_timeout = absl::Seconds(60);
    return options;
  }

  static std::unique_ptr<DrafterHandler> Drafter(const DrafterOptions& options = Options()) {
    return testing::MakeDrafter(Target(), options);
  }

  // A verifier whose sessions tap the drafter's layers by default.
  static std::unique_ptr<verifier::VerifierHandler> Verifier() {
    verifier::VerifierOptions options;
    options.model_name = "qwen35-tiny-a";
    options.quantization = "dense";
    options.tapped_layer_ids = kTaps;
    options.max_session_length = kMaxLength;
    options.max_block_size = kTrainedBlock;
    return verifier::testing::MakeVerifier(Target(), options);
  }

  static std::vector<int64_t> Prompt(int64_t length, uint64_t seed = 4) {
    return engine::testing::RandomPrompt(seed, length, Vocab());
  }

  // What in-process drafting proposes after `prompt` alone, for the anchor Prefill returned.
  static std::vector<int64_t> ProposedInProcess(const std::vector<int64_t>& prompt, int64_t anchor,
                                                const engine::DraftOptions& options) {
    const engine::testing::Drafting dflash = InProcessDrafter(Target(), options);
    EXPECT_NE(dflash.drafter, nullptr);
    if (dflash.drafter == nullptr) return {};
    InProcessDrafting drafting(Target(), dflash);
    const absl::Status started = drafting.Start(prompt, kMaxLength);
    EXPECT_TRUE(started.ok()) << started;
    absl::StatusOr<std::vector<int64_t>> proposed = drafting.Propose(anchor, kTrainedBlock - 1);
    EXPECT_TRUE(proposed.ok()) << proposed.status();
    return proposed.ok() ? *proposed : std::vector<int64_t>{};
  }

  static inline std::unique_ptr<model::Qwen35Model> target_;
};

engine::DraftOptions BlockOptions(int64_t block_size, int64_t window = 0,
                                  double min_confidence = 0) {
  return {.block_size = block_size, .window = window, .min_confidence = min_confidence};
}

std::vector<float> Confidences(const v1::DraftResponse& response) {
  return {response.confidence().begin(), response.confidence().end()};
}

TEST_F(DrafterHandlerTest, DraftingThroughTheServiceEqualsInProcessDraftingStepByStep) {
  std::unique_ptr<verifier::VerifierHandler> verifier = Verifier();
  std::unique_ptr<DrafterHandler> drafter = Drafter();
  const engine::testing::Drafting dflash = InProcessDrafter(Target(), BlockOptions(kTrainedBlock));
  ASSERT_TRUE(verifier != nullptr && drafter != nullptr && dflash.drafter != nullptr);
  VerifiedDrafting session(*verifier, Target(), dflash);
  const std::vector<int64_t> prompt = Prompt(20);
  ASSERT_TRUE(session.Start(prompt, kMaxLength).ok());
  for (int step = 0; step < 8; ++step) {
    absl::StatusOr<v1::DraftResponse> draft =
        drafter->Draft(DraftRequestFor("s", session.context(), session.anchor()));
    ASSERT_TRUE(draft.ok()) << "step " << step << ": " << draft.status();
    absl::StatusOr<std::vector<int64_t>> proposed = session.Propose(kTrainedBlock - 1);
    ASSERT_TRUE(proposed.ok()) << proposed.status();
    const std::vector<int64_t> drafts = Ids(draft->draft_token_ids());
    EXPECT_EQ(drafts, *proposed) << "step " << step;
    EXPECT_EQ(draft->context_length(), session.context().token_range().end()) << "step " << step;
    EXPECT_TRUE(draft->confidence().empty()) << "only on request";
    ASSERT_TRUE(session.Verify(drafts).ok());
  }
  std::vector<int64_t> emitted(session.committed().begin() + prompt.size(),
                               session.committed().end());
  emitted.push_back(session.anchor());
  EXPECT_EQ(emitted,
            engine::testing::TargetOnly(
                Target(), engine::testing::Request(prompt, static_cast<int64_t>(emitted.size())))
                .ids);
}

TEST_F(DrafterHandlerTest, ASessionWithoutRoomInTheMemoryBudgetIsRefusedAtOnce) {
  std::unique_ptr<verifier::VerifierHandler> verifier = Verifier();
  std::unique_ptr<DrafterHandler> probe = Drafter();
  ASSERT_TRUE(verifier != nullptr && probe != nullptr);
  // Room for one session as long as the verifier's buffers, not two.
  const model::CacheFootprint footprint = probe->drafter().SessionFootprint();
  std::unique_ptr<engine::CachePool> pool = *engine::CachePool::Create(
      {.budget_bytes = footprint.Bytes(kMaxLength) * 3 / 2, .block_tokens = 16, .max_waiting = 4});
  DrafterOptions options = Options();
  options.cache_pool = pool.get();
  std::unique_ptr<DrafterHandler> drafter = Drafter(options);
  ASSERT_NE(drafter, nullptr);
  absl::StatusOr<v1::PrefillResponse> prefill =
      verifier->Prefill(PrefillRequestFor("s", Prompt(20)));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  // Two drafter sessions on the verifier session's context.
  const auto draft = [&](const char* session) {
    return drafter->Draft(DraftRequestFor(session, prefill->context(), prefill->next_token_id()));
  };
  EXPECT_TRUE(draft("a").ok());
  const absl::StatusOr<v1::DraftResponse> refused = draft("b");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_EQ(drafter->open_sessions(), 1u) << "the refused session is not kept";
  EXPECT_EQ(pool->use().sequences, 1);
}

TEST_F(DrafterHandlerTest, BlockSizeSetsHowManyTokensAreProposedUpToTheTrainedOne) {
  std::unique_ptr<verifier::VerifierHandler> verifier = Verifier();
  std::unique_ptr<DrafterHandler> drafter = Drafter();
  ASSERT_TRUE(verifier != nullptr && drafter != nullptr);
  const std::vector<int64_t> prompt = Prompt(16);
  absl::StatusOr<v1::PrefillResponse> prefill = verifier->Prefill(PrefillRequestFor("v", prompt));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  const int64_t anchor = prefill->next_token_id();

  for (const int64_t block_size : {int64_t{0}, int64_t{1}, int64_t{3}, kTrainedBlock}) {
    v1::DraftRequest request =
        DraftRequestFor("block" + std::to_string(block_size), prefill->context(), anchor);
    request.set_block_size(static_cast<uint32_t>(block_size));
    absl::StatusOr<v1::DraftResponse> draft = drafter->Draft(request);
    ASSERT_TRUE(draft.ok()) << draft.status();
    const int64_t effective = block_size == 0 ? kTrainedBlock : block_size;  // 0: the trained one
    EXPECT_EQ(draft->draft_token_ids_size(), effective - 1) << "block " << block_size;
    EXPECT_EQ(Ids(draft->draft_token_ids()),
              ProposedInProcess(prompt, anchor, BlockOptions(effective)))
        << "block " << block_size;
  }
  const size_t open = drafter->open_sessions();
  v1::DraftRequest too_big = DraftRequestFor("too-big", prefill->context(), anchor);
  too_big.set_block_size(kTrainedBlock + 1);
  EXPECT_EQ(drafter->Draft(too_big).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(drafter->open_sessions(), open);
}

TEST_F(DrafterHandlerTest, TheWindowDefaultsToTheServersAndLimitsWhatTheBlockAttendsTo) {
  DrafterOptions options = Options();
  options.default_window = 3;
  std::unique_ptr<DrafterHandler> drafter = Drafter(options);
  std::unique_ptr<verifier::VerifierHandler> verifier = Verifier();
  ASSERT_TRUE(verifier != nullptr && drafter != nullptr);
  const std::vector<int64_t> prompt = Prompt(40);
  absl::StatusOr<v1::PrefillResponse> prefill = verifier->Prefill(PrefillRequestFor("v", prompt));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  const int64_t anchor = prefill->next_token_id();
  const auto draft = [&](const std::string& session, std::optional<uint32_t> window) {
    v1::DraftRequest request = DraftRequestFor(session, prefill->context(), anchor);
    if (window.has_value()) request.set_window(*window);
    request.set_return_confidence(true);
    absl::StatusOr<v1::DraftResponse> response = drafter->Draft(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : v1::DraftResponse();
  };
  const v1::DraftResponse by_default = draft("default", std::nullopt);
  const v1::DraftResponse three = draft("three", 3);
  const v1::DraftResponse full = draft("full", 0);

  EXPECT_EQ(Ids(by_default.draft_token_ids()), Ids(three.draft_token_ids()));
  EXPECT_EQ(Confidences(by_default), Confidences(three));
  EXPECT_EQ(Ids(three.draft_token_ids()),
            ProposedInProcess(prompt, anchor, BlockOptions(kTrainedBlock, 3)));
  EXPECT_EQ(Ids(full.draft_token_ids()),
            ProposedInProcess(prompt, anchor, BlockOptions(kTrainedBlock, 0)));
  EXPECT_NE(Confidences(three), Confidences(full)) << "a window of 3 must see less than all 40";
}

TEST_F(DrafterHandlerTest, MinConfidenceCutsTheProposalBeforeItsFirstUnlikelyToken) {
  std::unique_ptr<verifier::VerifierHandler> verifier = Verifier();
  std::unique_ptr<DrafterHandler> drafter = Drafter();
  ASSERT_TRUE(verifier != nullptr && drafter != nullptr);
  const std::vector<int64_t> prompt = Prompt(24);
  absl::StatusOr<v1::PrefillResponse> prefill = verifier->Prefill(PrefillRequestFor("v", prompt));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  const int64_t anchor = prefill->next_token_id();

  v1::DraftRequest request = DraftRequestFor("whole", prefill->context(), anchor);
  request.set_return_confidence(true);
  absl::StatusOr<v1::DraftResponse> whole = drafter->Draft(request);
  ASSERT_TRUE(whole.ok()) << whole.status();
  const std::vector<int64_t> ids = Ids(whole->draft_token_ids());
  const std::vector<float> confidence = Confidences(*whole);
  ASSERT_EQ(ids.size(), static_cast<size_t>(kTrainedBlock - 1));
  ASSERT_EQ(confidence.size(), ids.size());
  for (const float p : confidence) {
    EXPECT_GT(p, 0);
    EXPECT_LE(p, 1);
  }

  // Thresholds at each proposal's own confidence, and one no proposal reaches.
  std::vector<float> thresholds = confidence;
  thresholds.push_back(1);
  int cut_inside = 0;
  for (size_t t = 0; t < thresholds.size(); ++t) {
    const float threshold = thresholds[t];
    size_t kept = 0;
    while (kept < confidence.size() && confidence[kept] >= threshold) ++kept;
    request.set_session_id("cut" + std::to_string(t));
    request.set_min_confidence(threshold);
    absl::StatusOr<v1::DraftResponse> cut = drafter->Draft(request);
    ASSERT_TRUE(cut.ok()) << cut.status();
    EXPECT_EQ(Ids(cut->draft_token_ids()), std::vector<int64_t>(ids.begin(), ids.begin() + kept))
        << "threshold " << threshold;
    EXPECT_EQ(Confidences(*cut), std::vector<float>(confidence.begin(), confidence.begin() + kept));
    EXPECT_EQ(Ids(cut->draft_token_ids()),
              ProposedInProcess(prompt, anchor, BlockOptions(kTrainedBlock, 0, threshold)));
    if (kept > 0 && kept < ids.size()) ++cut_inside;
    v1::DrafterServiceReleaseRequest release;
    release.set_session_id(request.session_id());
    ASSERT_TRUE(drafter->Release(release).ok());
  }
  EXPECT_GT(cut_inside, 0) << "no threshold cut the block part-way: pick another prompt";
}

TEST_F(DrafterHandlerTest, AnOlderGenerationIsAbortedAndTheSameOneIsARetry) {
  std::unique_ptr<verifier::VerifierHandler> verifier = Verifier();
  std::unique_ptr<DrafterHandler> drafter = Drafter();
  ASSERT_TRUE(verifier != nullptr && drafter != nullptr);
  absl::StatusOr<v1::PrefillResponse> prefill =
      verifier->Prefill(PrefillRequestFor("s", Prompt(12)));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  absl::StatusOr<v1::DraftResponse> first =
      drafter->Draft(DraftRequestFor("s", prefill->context(), prefill->next_token_id()));
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<v1::VerifyResponse> verify =
      verifier->Verify(VerifyRequestFor("s", 1, Ids(first->draft_token_ids())));
  ASSERT_TRUE(verify.ok()) << verify.status();
  const v1::DraftRequest latest = DraftRequestFor("s", verify->context(), verify->next_token_id());
  absl::StatusOr<v1::DraftResponse> second = drafter->Draft(latest);
  ASSERT_TRUE(second.ok()) << second.status();

  EXPECT_EQ(drafter->Draft(DraftRequestFor("s", prefill->context(), prefill->next_token_id()))
                .status()
                .code(),
            absl::StatusCode::kAborted);
  absl::StatusOr<v1::DraftResponse> retry = drafter->Draft(latest);
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(Ids(retry->draft_token_ids()), Ids(second->draft_token_ids()));
  EXPECT_EQ(retry->context_length(), second->context_length());
}

TEST_F(DrafterHandlerTest, RequestsItCannotServeAreInvalidArguments) {
  std::unique_ptr<verifier::VerifierHandler> verifier = Verifier();
  std::unique_ptr<DrafterHandler> drafter = Drafter();
  ASSERT_TRUE(verifier != nullptr && drafter != nullptr);
  const std::vector<int64_t> prompt = Prompt(8);
  absl::StatusOr<v1::PrefillResponse> prefill = verifier->Prefill(PrefillRequestFor("s", prompt));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  const v1::DraftRequest good = DraftRequestFor("s", prefill->context(), prefill->next_token_id());
  const auto refused = [&](auto change) {
    v1::DraftRequest request = good;
    change(request);
    return drafter->Draft(request).status().code();
  };
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

  // One tapped layer instead of the drafter's two: rows half as wide.
  absl::StatusOr<v1::PrefillResponse> narrow = verifier->Prefill(
      PrefillRequestFor("narrow", prompt, verifier::testing::Greedy(), /*tapped_layer_ids=*/{0}));
  ASSERT_TRUE(narrow.ok()) << narrow.status();
  EXPECT_EQ(refused([&](v1::DraftRequest& r) { *r.mutable_context() = narrow->context(); }),
            kInvalid);
  EXPECT_EQ(
      refused([](v1::DraftRequest& r) { r.mutable_context()->set_dtype(v1::DTYPE_BFLOAT16); }),
      kInvalid);
  EXPECT_EQ(refused([](v1::DraftRequest& r) { r.mutable_context()->mutable_cuda_ipc(); }), kInvalid)
      << "a memory kind this drafter cannot map";
  EXPECT_EQ(refused([](v1::DraftRequest& r) { r.set_block_size(kTrainedBlock + 1); }), kInvalid);
  EXPECT_EQ(refused([&](v1::DraftRequest& r) { r.set_anchor_token_id(Vocab()); }), kInvalid);
  EXPECT_EQ(refused([](v1::DraftRequest& r) { r.set_min_confidence(1.5); }), kInvalid);
  EXPECT_EQ(refused([](v1::DraftRequest& r) {
              r.mutable_sampling()->set_temperature(1);
              r.mutable_sampling()->set_top_p(1.5);
            }),
            kInvalid);

  absl::StatusOr<v1::DraftResponse> draft = drafter->Draft(good);
  ASSERT_TRUE(draft.ok()) << draft.status();
  EXPECT_EQ(Ids(draft->draft_token_ids()),
            ProposedInProcess(prompt, prefill->next_token_id(), BlockOptions(kTrainedBlock)));
}

TEST_F(DrafterHandlerTest, UnderRejectionSamplingDraftsAreDrawnWithTheirDistributions) {
  std::unique_ptr<verifier::VerifierHandler> verifier = Verifier();
  ASSERT_NE(verifier, nullptr);
  const std::vector<int64_t> prompt = Prompt(8);
  absl::StatusOr<v1::PrefillResponse> prefill = verifier->Prefill(PrefillRequestFor("s", prompt));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  v1::DraftRequest request = DraftRequestFor("s", prefill->context(), prefill->next_token_id());
  request.mutable_sampling()->set_temperature(1);
  request.mutable_sampling()->set_seed(11);
  // The draws come from (seed, position): another server, or the same one again, draws alike.
  std::vector<std::vector<int64_t>> proposals;
  for (int server = 0; server < 2; ++server) {
    std::unique_ptr<DrafterHandler> drafter = Drafter();
    ASSERT_NE(drafter, nullptr);
    absl::StatusOr<v1::DraftResponse> draft = drafter->Draft(request);
    ASSERT_TRUE(draft.ok()) << draft.status();
    ASSERT_EQ(draft->distributions_size(), draft->draft_token_ids_size());
    for (int i = 0; i < draft->draft_token_ids_size(); ++i) {
      const v1::DraftDistribution& q = draft->distributions(i);
      ASSERT_LE(q.token_ids_size(), engine::DraftSampling::kDraftSupport);
      float total = 0;
      float drafted = 0;
      for (int k = 0; k < q.token_ids_size(); ++k) {
        total += q.probabilities(k);
        if (q.token_ids(k) == draft->draft_token_ids(i)) drafted = q.probabilities(k);
      }
      EXPECT_NEAR(total, 1, 1e-5);
      EXPECT_GT(drafted, 0) << "draft " << i << " was drawn from its distribution";
    }
    proposals.push_back(Ids(draft->draft_token_ids()));
  }
  EXPECT_EQ(proposals[0], proposals[1]);
  // A request that draws nothing gets the most likely tokens and no distributions.
  request.clear_sampling();
  std::unique_ptr<DrafterHandler> drafter = Drafter();
  ASSERT_NE(drafter, nullptr);
  absl::StatusOr<v1::DraftResponse> greedy = drafter->Draft(request);
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  EXPECT_EQ(greedy->distributions_size(), 0);
  EXPECT_EQ(Ids(greedy->draft_token_ids()),
            ProposedInProcess(prompt, prefill->next_token_id(), BlockOptions(kTrainedBlock)));
}

// Rows of Verifies it was not called for, or called with a block of one (which proposes nothing
// and leaves the context for later), are taken in by the next Draft that drafts.
TEST_F(DrafterHandlerTest, RowsOfVerifiesItDidNotDraftAfterAreProjectedToo) {
  std::unique_ptr<verifier::VerifierHandler> verifier = Verifier();
  std::unique_ptr<DrafterHandler> drafter = Drafter();
  const engine::testing::Drafting dflash = InProcessDrafter(Target(), BlockOptions(kTrainedBlock));
  ASSERT_TRUE(verifier != nullptr && drafter != nullptr && dflash.drafter != nullptr);
  const std::vector<int64_t> prompt = Prompt(15);
  const std::vector<int64_t> expected =
      engine::testing::TargetOnly(Target(), engine::testing::Request(prompt, 6)).ids;
  absl::StatusOr<v1::PrefillResponse> prefill = verifier->Prefill(PrefillRequestFor("s", prompt));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  ASSERT_TRUE(drafter->Draft(DraftRequestFor("s", prefill->context(), expected[0])).ok());

  // Two Verifies, the first with only a block of one drafted after it: the second handle names
  // only its own rows.
  const std::vector<int64_t> first_block = {expected[0], expected[1], expected[2]};
  absl::StatusOr<v1::VerifyResponse> first =
      verifier->Verify(VerifyRequestFor("s", 1, {expected[1], expected[2]}));
  ASSERT_TRUE(first.ok()) << first.status();
  v1::DraftRequest nothing = DraftRequestFor("s", first->context(), first->next_token_id());
  nothing.set_block_size(1);
  absl::StatusOr<v1::DraftResponse> deferred = drafter->Draft(nothing);
  ASSERT_TRUE(deferred.ok()) << deferred.status();
  EXPECT_EQ(deferred->draft_token_ids_size(), 0);
  EXPECT_EQ(deferred->context_length(), prompt.size()) << "the context waits";
  absl::StatusOr<v1::VerifyResponse> second = verifier->Verify(VerifyRequestFor("s", 2, {}));
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->context().token_range().begin(), prompt.size() + 3);
  absl::StatusOr<v1::DraftResponse> draft =
      drafter->Draft(DraftRequestFor("s", second->context(), second->next_token_id()));
  ASSERT_TRUE(draft.ok()) << draft.status();
  EXPECT_EQ(draft->context_length(), prompt.size() + 4);

  InProcessDrafting in_process(Target(), dflash);
  ASSERT_TRUE(in_process.Start(prompt, kMaxLength).ok());
  ASSERT_TRUE(in_process.Commit(first_block, 3).ok());
  ASSERT_TRUE(in_process.Commit({expected[3]}, 1).ok());
  absl::StatusOr<std::vector<int64_t>> proposed =
      in_process.Propose(second->next_token_id(), kTrainedBlock - 1);
  ASSERT_TRUE(proposed.ok()) << proposed.status();
  EXPECT_EQ(Ids(draft->draft_token_ids()), *proposed);
}

// What the orchestrator's speculation guard prices a step by: the forwards that ran it (their
// rows, the drafts asked of the draft forward) and how long each call waited for its forward.
TEST_F(DrafterHandlerTest, ResponsesDescribeTheForwardsThatRanThem) {
  std::unique_ptr<verifier::VerifierHandler> verifier = Verifier();
  std::unique_ptr<DrafterHandler> drafter = Drafter();
  ASSERT_TRUE(verifier != nullptr && drafter != nullptr);
  const std::vector<int64_t> prompt = Prompt(15);
  absl::StatusOr<v1::PrefillResponse> prefill = verifier->Prefill(PrefillRequestFor("s", prompt));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  absl::StatusOr<v1::DraftResponse> draft =
      drafter->Draft(DraftRequestFor("s", prefill->context(), prefill->next_token_id()));
  ASSERT_TRUE(draft.ok()) << draft.status();
  // Alone in its forward: its block and the prompt's rows it took in.
  EXPECT_EQ(draft->forward_rows(), kTrainedBlock + prompt.size());
  EXPECT_EQ(draft->forward_drafts(), kTrainedBlock - 1);
  EXPECT_LE(rpc::ToMilliseconds(draft->queue_time()), rpc::ToMilliseconds(draft->compute_time()));
  absl::StatusOr<v1::VerifyResponse> verified =
      verifier->Verify(VerifyRequestFor("s", 1, Ids(draft->draft_token_ids())));
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_EQ(verified->forward_rows(), kTrainedBlock);
  EXPECT_EQ(verified->forward_sequences(), 1);
  EXPECT_LE(rpc::ToMilliseconds(verified->queue_time()),
            rpc::ToMilliseconds(verified->compute_time()));
}

TEST_F(DrafterHandlerTest, RowsRewrittenBelowTheCachedLengthAreDroppedAndProjectedAgain) {
  std::unique_ptr<DrafterHandler> drafter = Drafter();
  ASSERT_NE(drafter, nullptr);
  // The test is the verifier: it owns the buffer and rewrites rows [6, 10) of it.
  const int64_t width = static_cast<int64_t>(kTaps.size()) * Target().config().hidden_size;
  absl::StatusOr<rpc::ContextBuffer> buffer =
      rpc::ContextBuffer::Create("test-verifier", 1, kMaxLength, width);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  const std::vector<int64_t> before = Prompt(10, /*seed=*/1);
  std::vector<int64_t> after(before.begin(), before.begin() + 6);
  const std::vector<int64_t> tail = Prompt(6, /*seed=*/2);
  after.insert(after.end(), tail.begin(), tail.end());
  const at::Tensor rows_before = TappedHiddenStates(Target(), before, kTaps).contiguous();
  const at::Tensor rows_after = TappedHiddenStates(Target(), after, kTaps).contiguous();
  constexpr int64_t kAnchor = 17;

  ASSERT_TRUE(buffer->WriteRows(0, rows_before.data_ptr<float>(), 10).ok());
  absl::StatusOr<v1::DraftResponse> first =
      drafter->Draft(DraftRequestFor("s", buffer->Publish(0, 10), kAnchor));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->context_length(), 10u);
  const at::Tensor rewritten = rows_after.narrow(0, 6, 6).contiguous();
  ASSERT_TRUE(buffer->WriteRows(6, rewritten.data_ptr<float>(), 6).ok());
  absl::StatusOr<v1::DraftResponse> second =
      drafter->Draft(DraftRequestFor("s", buffer->Publish(6, 12), kAnchor));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->context_length(), 12u);

  // In process: the rows the buffer now holds, [0, 6) from before and [6, 12) from after.
  const auto proposed = [&](const at::Tensor& head, const at::Tensor& rest) {
    const engine::testing::Drafting dflash =
        InProcessDrafter(Target(), BlockOptions(kTrainedBlock));
    EXPECT_NE(dflash.drafter, nullptr);
    if (dflash.drafter == nullptr) return std::vector<int64_t>{};
    absl::StatusOr<std::unique_ptr<engine::DraftSession>> session =
        dflash.drafter->OpenSession(kMaxLength);
    EXPECT_TRUE(session.ok()) << session.status();
    if (!session.ok()) return std::vector<int64_t>{};
    EXPECT_TRUE((*session)->Append({.begin = 0, .ids = {}, .rows = head}).ok());
    EXPECT_TRUE((*session)->Append({.begin = head.size(0), .ids = {}, .rows = rest}).ok());
    absl::StatusOr<engine::DraftProposal> proposal =
        (*session)->Propose(kAnchor, kTrainedBlock - 1, dflash.options, false);
    EXPECT_TRUE(proposal.ok()) << proposal.status();
    return proposal.ok() ? proposal->tokens : std::vector<int64_t>{};
  };
  const std::vector<int64_t> expected =
      proposed(rows_before.narrow(0, 0, 6), rows_after.narrow(0, 6, 6));
  EXPECT_EQ(Ids(second->draft_token_ids()), expected);
  // What keeping the stale rows [6, 10) would have proposed; the test tells the two apart.
  ASSERT_NE(proposed(rows_before, rows_after.narrow(0, 10, 2)), expected);
}

TEST_F(DrafterHandlerTest, AHandleToAnotherBufferStartsTheContextOver) {
  // The verifier's session is released and opened again under the same id (say, after the
  // verifier restarted) with a longer prompt; the drafter's first handle of the new buffer is a
  // Verify's, whose rows begin past everything the old buffer held.
  std::unique_ptr<verifier::VerifierHandler> verifier = Verifier();
  std::unique_ptr<DrafterHandler> drafter = Drafter();
  const engine::testing::Drafting dflash = InProcessDrafter(Target(), BlockOptions(kTrainedBlock));
  ASSERT_TRUE(verifier != nullptr && drafter != nullptr && dflash.drafter != nullptr);
  absl::StatusOr<v1::PrefillResponse> old_prefill =
      verifier->Prefill(PrefillRequestFor("s", Prompt(8, /*seed=*/21)));
  ASSERT_TRUE(old_prefill.ok()) << old_prefill.status();
  ASSERT_TRUE(
      drafter->Draft(DraftRequestFor("s", old_prefill->context(), old_prefill->next_token_id()))
          .ok());
  v1::TargetVerifierServiceReleaseRequest release;
  release.set_session_id("s");
  ASSERT_TRUE(verifier->Release(release).ok());

  const std::vector<int64_t> prompt = Prompt(14, /*seed=*/22);
  absl::StatusOr<v1::PrefillResponse> prefill = verifier->Prefill(PrefillRequestFor("s", prompt));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  ASSERT_NE(prefill->context().buffer_id(), old_prefill->context().buffer_id());
  absl::StatusOr<v1::VerifyResponse> verify = verifier->Verify(VerifyRequestFor("s", 1, {}));
  ASSERT_TRUE(verify.ok()) << verify.status();
  absl::StatusOr<v1::DraftResponse> draft =
      drafter->Draft(DraftRequestFor("s", verify->context(), verify->next_token_id()));
  ASSERT_TRUE(draft.ok()) << draft.status();

  InProcessDrafting in_process(Target(), dflash);
  ASSERT_TRUE(in_process.Start(prompt, kMaxLength).ok());
  ASSERT_TRUE(in_process.Commit({prefill->next_token_id()}, 1).ok());
  absl::StatusOr<std::vector<int64_t>> proposed =
      in_process.Propose(verify->next_token_id(), kTrainedBlock - 1);
  ASSERT_TRUE(proposed.ok()) << proposed.status();
  EXPECT_EQ(Ids(draft->draft_token_ids()), *proposed)
      << "rows of the old buffer must not stand in for the new buffer's";
}

TEST_F(DrafterHandlerTest, ReleaseEndsASessionAndAnIdleOneExpires) {
  DrafterOptions options = Options();
  options.session_idle_timeout = absl::Milliseconds(200);
  std::unique_ptr<DrafterHandler> drafter = Drafter(options);
  std::unique_ptr<verifier::VerifierHandler> verifier = Verifier();
  ASSERT_TRUE(verifier != nullptr && drafter != nullptr);
  absl::StatusOr<v1::PrefillResponse> prefill =
      verifier->Prefill(PrefillRequestFor("v", Prompt(9)));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  const auto draft = [&](const std::string& session) {
    return drafter->Draft(DraftRequestFor(session, prefill->context(), prefill->next_token_id()));
  };

  ASSERT_TRUE(draft("released").ok());
  EXPECT_EQ(drafter->open_sessions(), 1u);
  v1::DrafterServiceReleaseRequest release;
  release.set_session_id("released");
  absl::StatusOr<v1::DrafterServiceReleaseResponse> released = drafter->Release(release);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_TRUE(released->released());
  EXPECT_EQ(drafter->open_sessions(), 0u);
  released = drafter->Release(release);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_FALSE(released->released()) << "idempotent: a second Release finds nothing";

  absl::StatusOr<v1::DraftResponse> before = draft("idle");
  ASSERT_TRUE(before.ok()) << before.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(drafter->open_sessions(), 0u);
  release.set_session_id("idle");
  released = drafter->Release(release);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_FALSE(released->released()) << "expired";
  // A later Draft starts the session over from the whole buffer.
  absl::StatusOr<v1::DraftResponse> again = draft("idle");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Ids(again->draft_token_ids()), Ids(before->draft_token_ids()));
}

TEST_F(DrafterHandlerTest, BeyondMaxSessionsANewSessionIsResourceExhausted) {
  DrafterOptions options = Options();
  options.max_sessions = 1;
  std::unique_ptr<DrafterHandler> drafter = Drafter(options);
  std::unique_ptr<verifier::VerifierHandler> verifier = Verifier();
  ASSERT_TRUE(verifier != nullptr && drafter != nullptr);
  absl::StatusOr<v1::PrefillResponse> prefill =
      verifier->Prefill(PrefillRequestFor("v", Prompt(9)));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  const auto draft = [&](const std::string& session) {
    return drafter->Draft(DraftRequestFor(session, prefill->context(), prefill->next_token_id()))
        .status()
        .code();
  };
  EXPECT_EQ(draft("a"), absl::StatusCode::kOk);
  EXPECT_EQ(draft("b"), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(draft("a"), absl::StatusCode::kOk) << "an open session keeps drafting";
  v1::DrafterServiceReleaseRequest release;
  release.set_session_id("a");
  ASSERT_TRUE(drafter->Release(release).ok());
  EXPECT_EQ(draft("b"), absl::StatusCode::kOk);
}

TEST_F(DrafterHandlerTest, InfoDescribesTheDrafterAndTheServersLimits) {
  DrafterOptions options = Options();
  options.default_window = 5;
  options.session_idle_timeout = absl::Milliseconds(2500);
  std::unique_ptr<DrafterHandler> drafter = Drafter(options);
  ASSERT_NE(drafter, nullptr);
  absl::StatusOr<v1::DrafterServiceInfoResponse> info = drafter->Info();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(info->instance_id().empty());
  EXPECT_EQ(info->model_name(), "dflash-tiny-a");
  EXPECT_EQ(info->quantization(), "dense");
  EXPECT_EQ(info->block_size(), static_cast<uint32_t>(kTrainedBlock));
  EXPECT_EQ(info->max_block_size(), static_cast<uint32_t>(kTrainedBlock));
  EXPECT_EQ(info->mask_token_id(), 319u);
  EXPECT_EQ(std::vector<int64_t>(info->target_layer_ids().begin(), info->target_layer_ids().end()),
            kTaps);
  EXPECT_EQ(info->hidden_size(), 64u);
  EXPECT_EQ(info->num_layers(), 2u);
  EXPECT_EQ(info->vocab_size(), 320u);
  EXPECT_EQ(info->default_window(), 5u);
  // Host memory always; a verifier's device memory where built with CUDA.
  ASSERT_GE(info->memory_kinds_size(), 1);
  EXPECT_EQ(info->memory_kinds(0), v1::MEMORY_KIND_POSIX_SHM);
  std::vector<v1::MemoryKind> kinds;
  for (const int kind : info->memory_kinds()) kinds.push_back(static_cast<v1::MemoryKind>(kind));
  EXPECT_EQ(kinds, MappableMemoryKinds());
  EXPECT_EQ(info->device(), "cpu");
  EXPECT_FALSE(info->uses_shared_weights());
  EXPECT_EQ(info->max_sessions(), 8u);
  EXPECT_EQ(info->session_idle_timeout().seconds(), 2);
  EXPECT_EQ(info->session_idle_timeout().nanos(), 500'000'000);

  std::unique_ptr<DrafterHandler> restarted = Drafter(options);
  ASSERT_NE(restarted, nullptr);
  EXPECT_NE(restarted->Info()->instance_id(), info->instance_id());
}

TEST_F(DrafterHandlerTest, CreateRefusesADrafterForAnotherTargetAndBadOptions) {
  const auto refused = [](const io::Qwen35TextConfig& config, const DrafterOptions& options) {
    absl::StatusOr<ServedDrafter> drafter = OpenServedDrafter(
        testing::FixtureDFlashDir(), config, {},
        [&]() -> absl::StatusOr<model::TokenHead> { return Target().token_head(); });
    if (!drafter.ok()) return drafter.status().code();
    return DrafterHandler::Create(*std::move(drafter), config, options).status().code();
  };
  io::Qwen35TextConfig deeper = Target().config();
  deeper.num_hidden_layers = 6;
  EXPECT_NE(refused(deeper, Options()), absl::StatusCode::kOk);
  io::Qwen35TextConfig wider = Target().config();
  wider.hidden_size = 128;
  EXPECT_NE(refused(wider, Options()), absl::StatusCode::kOk);
  DrafterOptions no_sessions = Options();
  no_sessions.max_sessions = 0;
  EXPECT_EQ(refused(Target().config(), no_sessions), absl::StatusCode::kInvalidArgument);
  DrafterOptions negative_window = Options();
  negative_window.default_window = -1;
  EXPECT_EQ(refused(Target().config(), negative_window), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace specd::drafter
