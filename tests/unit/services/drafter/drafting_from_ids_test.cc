// The drafters that read committed token ids, served (drafter.proto's DraftRequest.committed): the
// suffix drafter alone drafts from the ids only, with no context buffer; combined with the DFlash
// drafter it reads both. Through the service each proposes exactly what it proposes in process on
// the same sequence, taking in only the ids it has not had; ids it cannot take are refused with the
// contract's codes.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/engine/combined_drafter.h"
#include "common/engine/drafter_factory.h"
#include "common/engine/suffix_drafter.h"
#include "gtest/gtest.h"
#include "services/drafter/drafter_handler.h"
#include "services/verifier/verifier_handler.h"
#include "tests/unit/common/engine/engine_fixture.h"
#include "tests/unit/services/drafter/drafter_fixture.h"
#include "tests/unit/services/verifier/verifier_fixture.h"

namespace specd::drafter {
namespace {

using verifier::testing::Ids;

constexpr int64_t kMaxLength = 128;
constexpr int64_t kSuffixBlock = engine::kDefaultModelFreeBlockSize;

class DraftingFromIdsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { target_ = engine::testing::LoadTarget("qwen35-tiny-a"); }
  static void TearDownTestSuite() { target_.reset(); }
  void SetUp() override { ASSERT_NE(target_, nullptr); }

  static const model::Qwen35Model& Target() { return *target_; }

  static std::unique_ptr<DrafterHandler> Handler(const std::string& source) {
    return testing::MakeDrafter(Target(),
                                {.model_name = source,
                                 .quantization = "",
                                 .default_window = 0,
                                 .max_sessions = 8,
                                 .session_idle_timeout = absl::Seconds(60),
                                 .open_sessions = nullptr,
                                 .batching = {},
                                 .cache_pool = nullptr},
                                source);
  }

  // A Draft of `session` after the committed positions [begin, begin + ids.size()).
  static v1::DraftRequest IdsRequest(int64_t begin, const std::vector<int64_t>& ids,
                                     int64_t anchor) {
    v1::DraftRequest request;
    request.set_session_id("s");
    request.set_anchor_token_id(static_cast<uint32_t>(anchor));
    request.mutable_committed()->set_begin(static_cast<uint32_t>(begin));
    request.mutable_committed()->mutable_ids()->Assign(ids.begin(), ids.end());
    request.set_max_session_length(kMaxLength);
    return request;
  }

  static inline std::unique_ptr<model::Qwen35Model> target_;
};

// "a b c d e f g" five times over: where the suffix drafter is sure.
std::vector<int64_t> Repetitive(int64_t length) {
  const std::vector<int64_t> phrase = {5, 17, 42, 99, 7, 256, 3};
  std::vector<int64_t> text;
  while (static_cast<int64_t>(text.size()) < length) {
    text.push_back(phrase[text.size() % phrase.size()]);
  }
  return text;
}

TEST_F(DraftingFromIdsTest, TheSuffixDrafterDraftsFromTheCommittedIdsAlone) {
  std::unique_ptr<DrafterHandler> served = Handler(engine::kSuffixDrafter);
  ASSERT_NE(served, nullptr);
  absl::StatusOr<v1::DrafterServiceInfoResponse> info = served->Info();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->target_layer_ids().empty()) << "it reads no hidden states";
  EXPECT_TRUE(info->memory_kinds().empty()) << "and maps no buffer";
  EXPECT_EQ(info->block_size(), kSuffixBlock);

  const engine::SuffixDrafter suffix(kSuffixBlock);
  absl::StatusOr<std::unique_ptr<engine::DraftSession>> in_process = suffix.OpenSession(kMaxLength);
  ASSERT_TRUE(in_process.ok()) << in_process.status();
  const engine::DraftOptions options = *suffix.Resolve({});

  // The sequence goes on repeating itself, but with one token changed, so that not every draft
  // is accepted; each step commits the anchor and the drafts that match it.
  std::vector<int64_t> text = Repetitive(100);
  text[60] = 300;
  int64_t committed = 30;
  int64_t sent = 0;  // positions the served session holds
  int64_t drafted = 0;
  for (int step = 0; committed + kSuffixBlock < static_cast<int64_t>(text.size()); ++step) {
    const std::vector<int64_t> new_ids(text.begin() + sent, text.begin() + committed);
    const int64_t anchor = text[committed];
    absl::StatusOr<v1::DraftResponse> draft = served->Draft(IdsRequest(sent, new_ids, anchor));
    ASSERT_TRUE(draft.ok()) << "step " << step << ": " << draft.status();
    ASSERT_TRUE((*in_process)->Append({.begin = sent, .ids = new_ids, .rows = {}}).ok());
    absl::StatusOr<engine::DraftProposal> proposal =
        (*in_process)->Propose(anchor, kSuffixBlock - 1, options, /*report_confidence=*/false);
    ASSERT_TRUE(proposal.ok()) << proposal.status();
    const std::vector<int64_t> drafts = Ids(draft->draft_token_ids());
    EXPECT_EQ(drafts, proposal->tokens) << "step " << step;
    EXPECT_EQ(draft->context_length(), committed) << "step " << step;
    drafted += static_cast<int64_t>(drafts.size());
    sent = committed;
    int64_t accepted = 0;
    while (accepted < static_cast<int64_t>(drafts.size()) &&
           drafts[accepted] == text[committed + 1 + accepted]) {
      ++accepted;
    }
    committed += 1 + accepted;
  }
  EXPECT_GT(drafted, 20) << "the repetition is drafted";
  EXPECT_EQ(served->open_sessions(), 1u);
}

TEST_F(DraftingFromIdsTest, IdsItCannotTakeAreRefused) {
  std::unique_ptr<DrafterHandler> served = Handler(engine::kSuffixDrafter);
  ASSERT_NE(served, nullptr);
  const std::vector<int64_t> prompt = Repetitive(20);
  const auto refused = [&](const v1::DraftRequest& request) {
    return served->Draft(request).status();
  };
  // A drafter that restarted has lost the session: ids from position 8 do not follow what it has.
  EXPECT_EQ(refused(IdsRequest(8, prompt, 5)).code(), absl::StatusCode::kFailedPrecondition);
  v1::DraftRequest out_of_vocabulary = IdsRequest(0, prompt, 5);
  out_of_vocabulary.mutable_committed()->set_ids(3, Target().config().vocab_size);
  EXPECT_EQ(refused(out_of_vocabulary).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused(out_of_vocabulary).message().find("committed.ids"), std::string::npos);
  v1::DraftRequest unsized = IdsRequest(0, prompt, 5);
  unsized.set_max_session_length(0);
  EXPECT_EQ(refused(unsized).code(), absl::StatusCode::kInvalidArgument);
  v1::DraftRequest too_short = IdsRequest(0, prompt, 5);
  too_short.set_max_session_length(19);
  EXPECT_EQ(refused(too_short).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(served->open_sessions(), 0u) << "a refused first Draft opens nothing";

  ASSERT_TRUE(served->Draft(IdsRequest(0, prompt, 5)).ok());
  EXPECT_EQ(refused(IdsRequest(21, {}, 5)).code(), absl::StatusCode::kFailedPrecondition)
      << "a gap after the 20 positions it holds";
  absl::StatusOr<v1::DraftResponse> again = served->Draft(IdsRequest(20, {5}, 17));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->context_length(), 21u);
}

// The combined drafter takes in the verifier's rows and the ids of the same positions, and
// drafts what the in-process combined drafter drafts on the same context.
TEST_F(DraftingFromIdsTest, TheCombinedDrafterReadsTheBufferAndTheIds) {
  std::unique_ptr<verifier::VerifierHandler> verifier =
      verifier::testing::MakeVerifier(Target(), {.model_name = "qwen35-tiny-a",
                                                 .quantization = "dense",
                                                 .tapped_layer_ids = {0, 2},
                                                 .max_sessions = 8,
                                                 .max_session_length = kMaxLength,
                                                 .max_block_size = 8,
                                                 .session_idle_timeout = absl::Seconds(60),
                                                 .open_sessions = nullptr,
                                                 .batching = {},
                                                 .cache_pool = nullptr});
  std::unique_ptr<DrafterHandler> served =
      Handler(engine::kCombinedDrafterPrefix + testing::FixtureDFlashDir());
  ASSERT_TRUE(verifier != nullptr && served != nullptr);
  engine::testing::Drafting combined{
      .drafter = std::make_unique<engine::CombinedDrafter>(
          engine::testing::BlockDrafter(engine::testing::FixtureDrafter(), Target())),
      .options = {}};
  combined.options = *combined.drafter->Resolve({});
  testing::VerifiedDrafting session(*verifier, Target(), combined);
  ASSERT_TRUE(session.Start(Repetitive(24), kMaxLength).ok());
  int64_t sent = 0;
  for (int step = 0; step < 6; ++step) {
    const std::vector<int64_t>& committed = session.committed();
    v1::DraftRequest request = IdsRequest(
        sent, std::vector<int64_t>(committed.begin() + sent, committed.end()), session.anchor());
    *request.mutable_context() = session.context();
    if (step == 0) {
      v1::DraftRequest short_of_the_rows = request;
      short_of_the_rows.mutable_committed()->mutable_ids()->RemoveLast();
      const absl::Status refused = served->Draft(short_of_the_rows).status();
      EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(refused.message().find("committed"), std::string::npos);
    }
    absl::StatusOr<v1::DraftResponse> draft = served->Draft(request);
    ASSERT_TRUE(draft.ok()) << "step " << step << ": " << draft.status();
    absl::StatusOr<std::vector<int64_t>> proposed =
        session.Propose(combined.options.block_size - 1);
    ASSERT_TRUE(proposed.ok()) << proposed.status();
    const std::vector<int64_t> drafts = Ids(draft->draft_token_ids());
    EXPECT_EQ(drafts, *proposed) << "step " << step;
    sent = draft->context_length();
    ASSERT_TRUE(session.Verify(drafts).ok());
  }
}

}  // namespace
}  // namespace specd::drafter
