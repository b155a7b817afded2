// A drafter head over a pruned vocabulary: the kept tokens are those the training data trains the
// drafter to produce most often (the fixture's answers are letters), the pruned checkpoint loads
// with them, its drafter proposes and draws only them — the very tokens of the full head when all
// are kept — and speculative decoding with it still gives the target's own greedy output.
#include "training/draft_vocabulary.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include "common/engine/dflash_block_drafter.h"
#include "common/engine/generator.h"
#include "common/model/qwen35_model.h"
#include "tests/unit/training/drafter_fixture.h"

namespace specd::train {
namespace {

class DraftVocabularyTest : public testing::DrafterFixture {
 protected:
  DraftVocabulary Kept(int64_t keep) const {
    absl::StatusOr<PackedDataset> dataset = PackedDataset::Open(data());
    EXPECT_TRUE(dataset.ok()) << dataset.status();
    absl::StatusOr<DraftVocabulary> vocab = MostFrequentTokens({&*dataset, 1}, keep);
    EXPECT_TRUE(vocab.ok()) << vocab.status();
    return vocab.value_or(DraftVocabulary{});
  }

  // The init drafter pruned to `vocab`, as the engine drafts with it.
  std::unique_ptr<engine::DFlashBlockDrafter> Pruned(const model::Qwen35Model& target,
                                                     const std::vector<int64_t>& vocab,
                                                     const std::string& name) const {
    const std::filesystem::path out = dir_.path() / name;
    const absl::Status written = WritePrunedDrafter(init(), vocab, out);
    EXPECT_TRUE(written.ok()) << written;
    absl::StatusOr<model::DFlashDrafter> drafter = model::DFlashDrafter::Load(out);
    EXPECT_TRUE(drafter.ok()) << drafter.status();
    if (!drafter.ok()) return nullptr;
    EXPECT_EQ(drafter->config().draft_vocab_size, static_cast<int64_t>(vocab.size()));
    absl::StatusOr<std::unique_ptr<engine::DFlashBlockDrafter>> block =
        engine::DFlashBlockDrafter::Create(*std::move(drafter), target.token_head(),
                                           target.config());
    EXPECT_TRUE(block.ok()) << block.status();
    return block.ok() ? *std::move(block) : nullptr;
  }

  // What `drafter` proposes after a context of random features and the anchor 'a': the most
  // likely tokens, or drawn at `temperature` with their distributions.
  static engine::DraftProposal Proposals(const engine::Drafter& drafter, int64_t hidden,
                                         double temperature = 0) {
    absl::StatusOr<std::unique_ptr<engine::DraftSession>> session = drafter.OpenSession(64);
    EXPECT_TRUE(session.ok()) << session.status();
    const auto taps = static_cast<int64_t>(drafter.TargetHiddenStates().size());
    at::manual_seed(9);
    const absl::Status appended = (*session)->Append(
        {.begin = 0, .ids = std::vector<int64_t>(6, 'a'), .rows = at::randn({6, taps * hidden})});
    EXPECT_TRUE(appended.ok()) << appended;
    absl::StatusOr<engine::DraftOptions> options =
        drafter.Resolve({.sampling = {.temperature = temperature}});
    absl::StatusOr<engine::DraftProposal> proposal =
        (*session)->Propose('a', testing::kBlockSize - 1, *options, false);
    EXPECT_TRUE(proposal.ok()) << proposal.status();
    return proposal.value_or(engine::DraftProposal());
  }
};

TEST_F(DraftVocabularyTest, TheKeptTokensAreTheOnesTheAnswersTrainMostOften) {
  // The answers' letters, their turns' <|im_end|> and the template's think block and newlines are
  // all that is trained: 30 tokens.
  const DraftVocabulary all = Kept(32);
  EXPECT_EQ(all.coverage, 1.0);
  const std::set<int64_t> kept(all.ids.begin(), all.ids.end());
  for (int64_t letter = 'a'; letter <= 'z'; ++letter) EXPECT_TRUE(kept.contains(letter)) << letter;
  EXPECT_TRUE(kept.contains(kByteLevelImEndId));
  EXPECT_TRUE(std::is_sorted(all.ids.begin(), all.ids.end()));
  const DraftVocabulary fewer = Kept(20);
  EXPECT_EQ(fewer.ids.size(), 20u);
  EXPECT_GT(fewer.coverage, 0.5);
  EXPECT_LT(fewer.coverage, 1.0);

  absl::StatusOr<PackedDataset> dataset = PackedDataset::Open(data());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  for (const int64_t keep : {int64_t{0}, dataset->vocab_size() + 1}) {
    EXPECT_EQ(MostFrequentTokens({&*dataset, 1}, keep).status().code(),
              absl::StatusCode::kInvalidArgument)
        << keep;
  }
}

TEST_F(DraftVocabularyTest, APrunedDrafterProposesOnlyItsTokensAndStaysLossless) {
  absl::StatusOr<model::Qwen35Model> target = model::Qwen35Model::Load(this->target());
  ASSERT_TRUE(target.ok()) << target.status();
  const int64_t hidden = target->config().hidden_size;

  // All of the vocabulary kept: the full head's proposals exactly.
  std::vector<int64_t> everything(kByteLevelVocabSize);
  std::iota(everything.begin(), everything.end(), 0);
  const std::unique_ptr<engine::DFlashBlockDrafter> whole = Pruned(*target, everything, "whole");
  absl::StatusOr<model::DFlashDrafter> init_drafter = model::DFlashDrafter::Load(init());
  ASSERT_TRUE(init_drafter.ok()) << init_drafter.status();
  absl::StatusOr<std::unique_ptr<engine::DFlashBlockDrafter>> full =
      engine::DFlashBlockDrafter::Create(*std::move(init_drafter), target->token_head(),
                                         target->config());
  ASSERT_TRUE(whole != nullptr && full.ok());
  EXPECT_EQ(Proposals(*whole, hidden).tokens, Proposals(**full, hidden).tokens);

  const std::vector<int64_t> frequent = Kept(20).ids;
  const std::unique_ptr<engine::DFlashBlockDrafter> pruned = Pruned(*target, frequent, "pruned");
  ASSERT_NE(pruned, nullptr);
  const std::set<int64_t> kept(frequent.begin(), frequent.end());
  for (const int64_t token : Proposals(*pruned, hidden).tokens) {
    EXPECT_TRUE(kept.contains(token)) << token;
  }
  const engine::DraftProposal drawn = Proposals(*pruned, hidden, /*temperature=*/1);
  ASSERT_EQ(drawn.distributions.size(), drawn.tokens.size());
  for (size_t i = 0; i < drawn.tokens.size(); ++i) {
    EXPECT_TRUE(kept.contains(drawn.tokens[i])) << drawn.tokens[i];
    for (const int64_t id : drawn.distributions[i].ids) EXPECT_TRUE(kept.contains(id)) << id;
  }

  const std::vector<int64_t> prompt = {'R', 'e', 'c', 'i', 't', 'e', ':', ' ', 'a', 'b'};
  const engine::GenerationRequest request{
      .prompt = prompt,
      .sampling = {},
      .stop = {.max_new_tokens = 24, .ignore_eos = true},
  };
  absl::StatusOr<engine::GenerationResult> plain =
      engine::Generator(*target, nullptr).Generate(request);
  absl::StatusOr<engine::Generator> speculative =
      engine::Generator::Speculative(*target, *pruned, nullptr);
  ASSERT_TRUE(plain.ok() && speculative.ok());
  absl::StatusOr<engine::GenerationResult> drafted = speculative->Generate(request);
  ASSERT_TRUE(drafted.ok()) << drafted.status();
  EXPECT_EQ(drafted->ids, plain->ids);
}

}  // namespace
}  // namespace specd::train
