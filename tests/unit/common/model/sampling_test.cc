// What each sampling parameter does to the next-token distribution, and that a seed fixes the
// tokens drawn.
#include "common/model/sampling.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/common/model/tensor_matchers.h"

namespace specd::model {
namespace {

using testing::AllClose;

// Logits whose softmax is exactly `probs`.
at::Tensor LogitsOf(const std::vector<float>& probs) { return at::tensor(probs).log(); }

std::vector<int64_t> Draw(Sampler& sampler, const at::Tensor& logits, int count) {
  std::vector<int64_t> tokens;
  for (int i = 0; i < count; ++i) tokens.push_back(sampler.Sample(logits, {}, {}));
  return tokens;
}

TEST(SamplerTest, GreedyTakesTheMostLikelyToken) {
  Sampler sampler({});
  EXPECT_EQ(sampler.Sample(at::tensor({0.1F, 3.0F, 2.9F}), {}, {}), 1);
  EXPECT_TRUE(at::equal(sampler.Probabilities(at::tensor({0.1F, 3.0F, 2.9F}), {}, {}),
                        at::tensor({0.0F, 1.0F, 0.0F})));
}

TEST(SamplerTest, TemperatureOneKeepsTheModelsDistribution) {
  const Sampler sampler({.temperature = 1.0});
  EXPECT_TRUE(AllClose(sampler.Probabilities(LogitsOf({0.5F, 0.3F, 0.2F}), {}, {}),
                       at::tensor({0.5F, 0.3F, 0.2F}), 1e-6));
}

TEST(SamplerTest, TopKKeepsTheKMostLikely) {
  const Sampler sampler({.temperature = 1.0, .top_k = 2});
  EXPECT_TRUE(AllClose(sampler.Probabilities(LogitsOf({0.1F, 0.5F, 0.4F}), {}, {}),
                       at::tensor({0.0F, 0.5F / 0.9F, 0.4F / 0.9F}), 1e-6));
}

TEST(SamplerTest, TopPKeepsTheSmallestSetReachingP) {
  const Sampler sampler({.temperature = 1.0, .top_p = 0.7});
  // 0.5 alone falls short of 0.7; with 0.3 it reaches it, so 0.15 and 0.05 go.
  EXPECT_TRUE(AllClose(sampler.Probabilities(LogitsOf({0.15F, 0.5F, 0.05F, 0.3F}), {}, {}),
                       at::tensor({0.0F, 0.625F, 0.0F, 0.375F}), 1e-6));
}

TEST(SamplerTest, MinPDropsTokensFarBelowTheBest) {
  const Sampler sampler({.temperature = 1.0, .min_p = 0.5});
  EXPECT_TRUE(AllClose(sampler.Probabilities(LogitsOf({0.5F, 0.3F, 0.2F}), {}, {}),
                       at::tensor({0.625F, 0.375F, 0.0F}), 1e-6));
}

TEST(SamplerTest, RepetitionPenaltyShrinksLogitsOfSeenTokensTowardUnlikely) {
  const Sampler sampler({.repetition_penalty = 2.0});
  const std::vector<int64_t> prompt = {0};
  const std::vector<int64_t> generated = {2, 2};
  EXPECT_TRUE(at::equal(sampler.PenalisedLogits(at::tensor({4.0F, 1.0F, -1.0F}), prompt, generated),
                        at::tensor({2.0F, 1.0F, -2.0F})));
}

TEST(SamplerTest, PresencePenaltyAppliesOncePerGeneratedToken) {
  const Sampler sampler({.presence_penalty = 1.5});
  const std::vector<int64_t> prompt = {1};  // the prompt is not penalised
  const std::vector<int64_t> generated = {2, 2};
  EXPECT_TRUE(at::equal(sampler.PenalisedLogits(at::tensor({4.0F, 1.0F, 1.0F}), prompt, generated),
                        at::tensor({4.0F, 1.0F, -0.5F})));
}

TEST(SamplerTest, FrequencyPenaltyAppliesOncePerOccurrenceOnTopOfPresence) {
  const Sampler sampler({.presence_penalty = 0.5, .frequency_penalty = 1.0});
  const std::vector<int64_t> generated = {2, 2, 1};
  EXPECT_TRUE(at::equal(sampler.PenalisedLogits(at::tensor({4.0F, 1.0F, 1.0F}), {}, generated),
                        at::tensor({4.0F, -0.5F, -1.5F})));
}

TEST(SamplerTest, TheEndingIdsGetNoProbabilityUntilMinNewTokens) {
  Sampler sampler({.temperature = 0, .min_new_tokens = 2, .ending_ids = {0}});
  const at::Tensor logits = at::tensor({9.0F, 1.0F, 2.0F});
  EXPECT_EQ(sampler.Sample(logits, {}, {}), 2);
  EXPECT_EQ(sampler.Sample(logits, {}, std::vector<int64_t>{2}), 2);
  EXPECT_EQ(sampler.Sample(logits, {}, std::vector<int64_t>{2, 2}), 0);  // the third may end
  const Sampler warm({.temperature = 1.0, .min_new_tokens = 1, .ending_ids = {0}});
  EXPECT_EQ(warm.Probabilities(logits, {}, {})[0].item<float>(), 0.0F);
}

// A verify block's rows at once: row i as Sample would pick it after the i drafts before it.
TEST(SamplerTest, GreedyTokensAreEachRowsSampleAfterTheContinuationBeforeIt) {
  const at::Tensor logits =
      at::tensor({4.0F, 3.5F, 1.0F, 0.0F, 3.9F, 3.0F, 1.0F, 0.0F, 2.0F, 2.0F, 3.0F, 2.5F})
          .reshape({3, 4});
  const std::vector<int64_t> generated = {2};
  const std::vector<int64_t> continuation = {0, 1};
  for (const SamplingParams& params :
       {SamplingParams{}, SamplingParams{.repetition_penalty = 2.0},
        SamplingParams{.presence_penalty = 1.0},
        SamplingParams{.temperature = 0, .min_new_tokens = 3, .ending_ids = {2}}}) {
    Sampler sampler(params);
    std::vector<int64_t> expected;
    std::vector<int64_t> seen = generated;
    for (int64_t i = 0; i < 3; ++i) {
      expected.push_back(sampler.Sample(logits[i], {}, seen));
      if (i < 2) seen.push_back(continuation[i]);
    }
    EXPECT_EQ(sampler.GreedyTokens(logits, {}, generated, continuation), expected);
  }
  // Penalties change the picks here, so the rows above were not all alike.
  EXPECT_EQ(Sampler({}).GreedyTokens(logits, {}, generated, continuation),
            (std::vector<int64_t>{0, 0, 2}));
  EXPECT_EQ(Sampler({.repetition_penalty = 2.0}).GreedyTokens(logits, {}, generated, continuation),
            (std::vector<int64_t>{0, 1, 3}));
}

TEST(SamplerTest, TheSameSeedDrawsTheSameTokens) {
  const at::Tensor logits = at::zeros({1000});
  Sampler first({.temperature = 1.0, .seed = 42});
  Sampler again({.temperature = 1.0, .seed = 42});
  Sampler other({.temperature = 1.0, .seed = 43});
  const std::vector<int64_t> tokens = Draw(first, logits, 20);
  EXPECT_EQ(Draw(again, logits, 20), tokens);
  EXPECT_NE(Draw(other, logits, 20), tokens);
}

TEST(SamplerTest, DrawsFollowTheDistribution) {
  Sampler sampler({.temperature = 1.0, .seed = 7});
  const std::vector<int64_t> tokens = Draw(sampler, LogitsOf({0.5F, 0.0F, 0.3F, 0.2F}), 4000);
  std::vector<double> frequency(4, 0.0);
  for (const int64_t token : tokens) frequency[token] += 1.0 / tokens.size();
  EXPECT_NEAR(frequency[0], 0.5, 0.03);
  EXPECT_EQ(frequency[1], 0.0);
  EXPECT_NEAR(frequency[2], 0.3, 0.03);
  EXPECT_NEAR(frequency[3], 0.2, 0.03);
}

}  // namespace
}  // namespace specd::model
