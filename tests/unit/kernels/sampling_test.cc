#include "kernels/cpu/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace specd::kernels::cpu {
namespace {

constexpr float kInfinity = std::numeric_limits<float>::infinity();

std::vector<float> Distribution(const std::vector<float>& scores, const Truncation& truncation) {
  std::vector<float> out(scores.size(), -1);
  TruncatedSoftmax(scores.data(), static_cast<int64_t>(scores.size()), truncation, out.data());
  return out;
}

// Random scores the size of Qwen3.5's vocabulary.
std::vector<float> RandomScores(int64_t n, float scale, uint32_t seed) {
  std::mt19937 random(seed);
  std::normal_distribution<float> normal;
  std::vector<float> scores(n);
  for (float& score : scores) score = scale * normal(random);
  return scores;
}

// softmax(scores / temperature) in double over the entries `kept` says stay, those under e^−87 of
// the largest's at 0 (as float32 underflows).
std::vector<double> ExpectedSoftmax(const std::vector<float>& scores, double temperature,
                                    const std::vector<bool>& kept) {
  const double largest = *std::max_element(scores.begin(), scores.end());
  std::vector<double> p(scores.size(), 0.0);
  double sum = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    const double x = (scores[i] - largest) / temperature;
    if (kept[i] && x > -87) sum += p[i] = std::exp(x);
  }
  for (double& value : p) value /= sum;
  return p;
}

// The same tokens kept, each probability within float32 rounding of the largest.
void ExpectClose(const std::vector<float>& actual, const std::vector<double>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  const double largest = *std::max_element(expected.begin(), expected.end());
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_EQ(actual[i] > 0, expected[i] > 0) << "at " << i;
    ASSERT_NEAR(actual[i], expected[i], 1e-6 * largest + 1e-5 * expected[i]) << "at " << i;
  }
}

TEST(TruncatedSoftmaxTest, WithoutTruncationIsTheSoftmaxOfTheScoresOverTheTemperature) {
  const std::vector<float> scores = RandomScores(248320, 4, 1);
  for (const float temperature : {0.3f, 1.0f, 1.7f}) {
    SCOPED_TRACE(temperature);
    ExpectClose(Distribution(scores, {.temperature = temperature}),
                ExpectedSoftmax(scores, temperature, std::vector<bool>(scores.size(), true)));
  }
}

TEST(TruncatedSoftmaxTest, TopKKeepsTheKLargestScoresAndEveryOneEqualToTheKth) {
  for (const int64_t k : {1, 20, 1000}) {
    std::vector<float> scores = RandomScores(100003, 3, 2);
    std::vector<float> sorted = scores;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    // Two more entries tie with the k-th largest: both stay.
    scores[17] = scores[99000] = sorted[k - 1];
    std::vector<bool> kept(scores.size());
    for (size_t i = 0; i < scores.size(); ++i) kept[i] = scores[i] >= sorted[k - 1];
    EXPECT_EQ(std::count(kept.begin(), kept.end(), true), k + 2);
    ExpectClose(Distribution(scores, {.temperature = 0.7f, .top_k = k}),
                ExpectedSoftmax(scores, 0.7, kept));
  }
}

TEST(TruncatedSoftmaxTest, TopPKeepsTheSmallestSetOfTheMostLikelyThatReachesP) {
  // 0.5 and 0.3 reach 0.75; 0.15 is ranked below 0.8 of the mass.
  ExpectClose(Distribution({std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)},
                           {.top_p = 0.75f}),
              {0, 0.625, 0, 0.375});
  for (const float top_p : {0.1f, 0.8f, 0.95f}) {
    SCOPED_TRACE(top_p);
    const std::vector<float> scores = RandomScores(248320, 4, 3);
    const std::vector<double> full =
        ExpectedSoftmax(scores, 1, std::vector<bool>(scores.size(), true));
    std::vector<int64_t> order(scores.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return full[a] > full[b]; });
    std::vector<bool> kept(scores.size());
    double above = 0;
    for (const int64_t i : order) {
      kept[i] = above < top_p;
      above += full[i];
    }
    ExpectClose(Distribution(scores, {.top_p = top_p}), ExpectedSoftmax(scores, 1, kept));
  }
}

TEST(TruncatedSoftmaxTest, EqualProbabilitiesAtTheCutRankByIndex) {
  // Ten equal scores scattered over the row, far above the rest: 0.35 of the mass takes four of
  // them, the four of lowest index.
  std::vector<float> scores(50000, -40.0f);
  const std::vector<int64_t> equal = {3, 900, 1024, 7777, 8000, 20001, 30000, 41234, 45000, 49999};
  for (const int64_t i : equal) scores[i] = 5;
  const std::vector<float> p = Distribution(scores, {.top_p = 0.35f});
  for (size_t j = 0; j < equal.size(); ++j) {
    EXPECT_FLOAT_EQ(p[equal[j]], j < 4 ? 0.25f : 0.0f) << "at " << equal[j];
  }
  EXPECT_FLOAT_EQ(std::accumulate(p.begin(), p.end(), 0.0f), 1.0f);
}

TEST(TruncatedSoftmaxTest, MinPDropsTokensBelowAShareOfTheMostLikely) {
  // Probabilities 0.5, 0.3, 0.15, 0.05: a bar of 0.2 × 0.5 drops 0.05.
  ExpectClose(Distribution({std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)},
                           {.min_p = 0.2f}),
              {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0});
}

TEST(TruncatedSoftmaxTest, NegativeInfinityGetsNoMass) {
  std::vector<float> scores = RandomScores(5000, 1, 4);
  for (int64_t i = 0; i < 5000; i += 3) scores[i] = -kInfinity;
  for (const Truncation& truncation :
       {Truncation{}, Truncation{.temperature = 50, .top_p = 0.99f}, Truncation{.top_k = 4000}}) {
    const std::vector<float> p = Distribution(scores, truncation);
    for (int64_t i = 0; i < 5000; i += 3) ASSERT_EQ(p[i], 0.0f) << "at " << i;
    EXPECT_NEAR(std::accumulate(p.begin(), p.end(), 0.0), 1.0, 1e-5);
  }
}

TEST(InverseCdfTest, DrawsTheFirstIndexWhoseCumulativeMassExceedsU) {
  // Mass in a few places across blocks of the sum, zeros between them.
  std::vector<float> p(5000, 0.0f);
  p[10] = 0.25f, p[1500] = 0.25f, p[1501] = 0.125f, p[4999] = 0.375f;
  EXPECT_EQ(InverseCdf(p.data(), 5000, 0.0), 10);
  EXPECT_EQ(InverseCdf(p.data(), 5000, 0.2499), 10);
  EXPECT_EQ(InverseCdf(p.data(), 5000, 0.25), 1500);  // the cumulative mass must exceed u
  EXPECT_EQ(InverseCdf(p.data(), 5000, 0.6), 1501);
  EXPECT_EQ(InverseCdf(p.data(), 5000, 0.625), 4999);
  EXPECT_EQ(InverseCdf(p.data(), 5000, 0.9999), 4999);
}

TEST(InverseCdfTest, AUPastTheMassDrawsTheLastIndexWithSome) {
  std::vector<float> p(3000, 0.0f);
  p[5] = 0.5f, p[2000] = 0.4f;  // rounding left a tenth out
  EXPECT_EQ(InverseCdf(p.data(), 3000, 0.95), 2000);
}

}  // namespace
}  // namespace specd::kernels::cpu
