// The suffix drafter proposes how the sequence went on after the longest earlier occurrence of its
// end, by the most frequent continuation, with each token's share of occurrences as confidence;
// nothing when the end never occurred; and, as every drafter, leaves the output exactly what
// target-only decoding gives.
#include "common/engine/suffix_drafter.h"

#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/engine/engine_fixture.h"

namespace specd::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatEq;
using ::testing::IsEmpty;

constexpr int64_t kBlock = 8;

SuffixTrie Indexed(const std::vector<int64_t>& sequence) {
  SuffixTrie trie(SuffixDrafter::kMaxMatch + kBlock - 1);
  for (const int64_t token : sequence) trie.Append(token);
  return trie;
}

TEST(SuffixTrieTest, ContinuesTheLongestEarlierMatchOfTheSequencesEnd) {
  // "1 2 3" occurred before, followed by 4 7 8; "2 3" alone also by 9.
  const SuffixTrie trie = Indexed({5, 2, 3, 9, 1, 2, 3, 4, 7, 8, 1, 2});
  EXPECT_THAT(trie.Continue(/*anchor=*/3, 3, SuffixDrafter::kMaxMatch, 0).tokens,
              ElementsAre(4, 7, 8));
  // Matching at most one token ("3"), the latest of the equally frequent continuations wins.
  EXPECT_THAT(trie.Continue(3, 1, /*max_match=*/1, 0).tokens, ElementsAre(4));
}

TEST(SuffixTrieTest, FollowsTheMostFrequentContinuationWithItsShareAsConfidence) {
  // "1 2" went on with 7 once and with 8 twice.
  const SuffixTrie trie = Indexed({1, 2, 7, 3, 1, 2, 8, 4, 1, 2, 8, 5, 1});
  const DraftProposal proposal = trie.Continue(2, 1, SuffixDrafter::kMaxMatch, 0);
  EXPECT_THAT(proposal.tokens, ElementsAre(8));
  EXPECT_THAT(proposal.confidence, ElementsAre(FloatEq(2.0f / 3)));
  EXPECT_THAT(trie.Continue(2, 1, SuffixDrafter::kMaxMatch, 0.7).tokens, IsEmpty());
}

TEST(SuffixTrieTest, ProposesNothingForAnEndThatNeverOccurred) {
  const SuffixTrie trie = Indexed({1, 2, 3, 4});
  EXPECT_THAT(trie.Continue(9, 4, SuffixDrafter::kMaxMatch, 0).tokens, IsEmpty());
  // 4 occurred only at the end: nothing followed it yet.
  EXPECT_THAT(Indexed({1, 2, 3}).Continue(3, 4, SuffixDrafter::kMaxMatch, 0).tokens, IsEmpty());
}

TEST(SuffixTrieTest, StopsWhereTheIndexedDepthEnds) {
  SuffixTrie trie(/*depth=*/3);
  for (const int64_t token : {1, 2, 3, 4, 5, 1}) trie.Append(token);
  // "1 2" matched at depth 2 leaves room for one more token of continuation.
  EXPECT_THAT(trie.Continue(2, 4, /*max_match=*/2, 0).tokens, ElementsAre(3));
}

TEST(SuffixDrafterTest, ASessionForgetsRewrittenPositions) {
  SuffixDrafter drafter(kBlock);
  absl::StatusOr<std::unique_ptr<DraftSession>> session = drafter.OpenSession(64);
  ASSERT_TRUE(session.ok()) << session.status();
  const DraftOptions options =
      *drafter.Resolve({.block_size = 0, .window = 0, .min_confidence = 0});
  ASSERT_TRUE((*session)->Append({.begin = 0, .ids = {1, 2, 3, 1}, .rows = {}}).ok());
  EXPECT_THAT((*session)->Propose(2, 1, options, false)->tokens, ElementsAre(3));
  // The target rewrote position 2 on: "1 2" now went on with 6.
  ASSERT_TRUE((*session)->Append({.begin = 2, .ids = {6, 1}, .rows = {}}).ok());
  EXPECT_EQ((*session)->length(), 4);
  EXPECT_THAT((*session)->Propose(2, 1, options, false)->tokens, ElementsAre(6));
  EXPECT_FALSE((*session)->Append({.begin = 9, .ids = {1}, .rows = {}}).ok());
}

TEST(SuffixDrafterTest, HasNoWindowAndTakesBlocksUpToItsOwn) {
  SuffixDrafter drafter(kBlock);
  EXPECT_EQ(drafter.Resolve({.block_size = 0, .window = 0, .min_confidence = 0})->block_size,
            kBlock);
  EXPECT_FALSE(drafter.Resolve({.block_size = 0, .window = 4, .min_confidence = 0}).ok());
  EXPECT_FALSE(drafter.Resolve({.block_size = kBlock + 1, .window = 0, .min_confidence = 0}).ok());
}

TEST(SuffixDrafterTest, GreedyOutputIsTargetOnlysAndItsRepetitionIsAccepted) {
  const std::unique_ptr<model::Qwen35Model> target = testing::LoadTarget("qwen35-tiny-a");
  ASSERT_NE(target, nullptr);
  // The random-weight fixture falls into repeating one token after ~45 new tokens.
  const GenerationRequest request = testing::Request({5, 17, 42, 99, 7, 256, 3, 18}, 120);
  const GenerationResult plain = testing::TargetOnly(*target, request);
  for (const int64_t block_size : {2, 4, 8}) {
    const GenerationResult speculative =
        testing::Speculative(*target, SuffixDrafter(block_size), request);
    EXPECT_EQ(speculative.ids, plain.ids) << "block " << block_size;
    ASSERT_TRUE(speculative.acceptance.has_value());
    EXPECT_GT(speculative.acceptance->tau(), 1.2) << "block " << block_size;
  }
  // Sampled, a seed gives the sequence it gives target-only.
  const GenerationRequest sampled =
      testing::Request({5, 17, 42, 99, 7, 256, 3, 18}, 60, /*temperature=*/0.8, /*seed=*/7);
  EXPECT_EQ(testing::Speculative(*target, SuffixDrafter(kBlock), sampled).ids,
            testing::TargetOnly(*target, sampled).ids);
}

}  // namespace
}  // namespace specd::engine
