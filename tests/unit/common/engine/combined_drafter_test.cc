// The combined drafter proposes, step by step, what its model or the suffix drafter is expected
// to have accepted longer, and does at least as well as the better of the two; its output is
// exactly target-only.
#include "common/engine/combined_drafter.h"

#include <memory>
#include <vector>

#include "common/engine/dflash_block_drafter.h"
#include "common/engine/oracle_drafter.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/engine/engine_fixture.h"

namespace specd::engine {
namespace {

using ::testing::DoubleEq;
using ::testing::ElementsAre;

TEST(CombinedDrafterTest, ExpectsEachTokenAcceptedWithItsConfidenceGivenThoseBefore) {
  EXPECT_EQ(ExpectedAcceptedLength({}), 0);
  const std::vector<float> sure = {1, 1, 1};
  EXPECT_THAT(ExpectedAcceptedLength(sure), DoubleEq(3));
  const std::vector<float> halving = {0.5f, 0.5f};
  EXPECT_THAT(ExpectedAcceptedLength(halving), DoubleEq(0.5 + 0.25));
}

class CombinedDrafterWithTargetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    target_ = testing::LoadTarget("qwen35-tiny-a");
    ASSERT_NE(target_, nullptr);
  }
  std::unique_ptr<Drafter> FixtureDFlash() const {
    return testing::BlockDrafter(testing::FixtureDrafter(), *target_);
  }
  std::unique_ptr<model::Qwen35Model> target_;
};

TEST_F(CombinedDrafterWithTargetTest, TakesTheOracleWhereTheTextNeverRepeated) {
  // The oracle is certain of every token; the suffix index has nothing yet.
  const CombinedDrafter combined(std::make_unique<OracleDrafter>(*target_, 4));
  absl::StatusOr<std::unique_ptr<DraftSession>> session = combined.OpenSession(32);
  ASSERT_TRUE(session.ok()) << session.status();
  const DraftOptions options =
      *combined.Resolve({.block_size = 0, .window = 0, .min_confidence = 0});
  ASSERT_TRUE((*session)->Append({.begin = 0, .ids = {5, 17, 42}, .rows = {}}).ok());
  absl::StatusOr<DraftProposal> proposal = (*session)->Propose(99, 3, options, false);
  ASSERT_TRUE(proposal.ok()) << proposal.status();
  EXPECT_EQ(proposal->tokens.size(), 3);
  EXPECT_TRUE(proposal->confidence.empty());
}

TEST_F(CombinedDrafterWithTargetTest, GreedyOutputIsTargetOnlysAndRepetitionGoesToTheSuffixIndex) {
  // The random-weight fixture drafter is rarely sure; the target falls into repeating one token
  // after ~45 new tokens, where the suffix drafter is.
  const std::unique_ptr<Drafter> dflash = FixtureDFlash();
  ASSERT_NE(dflash, nullptr);
  const GenerationRequest request = testing::Request({5, 17, 42, 99, 7, 256, 3, 18}, 120);
  const GenerationResult plain = testing::TargetOnly(*target_, request);
  const GenerationResult alone = testing::Speculative(*target_, *dflash, request);
  const GenerationResult combined =
      testing::Speculative(*target_, CombinedDrafter(FixtureDFlash()), request);
  EXPECT_EQ(combined.ids, plain.ids);
  ASSERT_TRUE(combined.acceptance.has_value());
  const GenerationResult suffix = testing::Speculative(*target_, SuffixDrafter(8), request);
  ASSERT_TRUE(alone.acceptance.has_value() && suffix.acceptance.has_value());
  // At least the better of the two (measured: τ 1.01 alone, 2.02 suffix, 2.05 combined).
  EXPECT_GE(combined.acceptance->tau(), alone.acceptance->tau());
  EXPECT_GE(combined.acceptance->tau(), suffix.acceptance->tau());
}

}  // namespace
}  // namespace specd::engine
