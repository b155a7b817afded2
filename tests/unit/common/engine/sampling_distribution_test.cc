// At temperature 1 speculative decoding samples from the target's distribution: the second
// generated token, the first that a draft can supply, follows the exact distribution computed
// from the target (Pearson's chi-square over a fixed set of seeds, so the test is deterministic).
// The same test rejects the samples of an engine that accepted drafts without comparing them to
// the target's choice, so the threshold is one a wrong acceptance rule fails.
#include <ATen/ATen.h>

#include <cmath>
#include <memory>
#include <vector>

#include "common/engine/dflash_block_drafter.h"
#include "common/engine/generator.h"
#include "common/engine/oracle_drafter.h"
#include "gtest/gtest.h"
#include "tests/unit/common/engine/engine_fixture.h"

namespace specd::engine {
namespace {

constexpr int64_t kSamples = 600;
constexpr int64_t kBlockSize = 4;

// The target's distribution of the first generated token after a prompt, and of the second
// (summed over the first), at temperature 1; and the greedy token after each first token.
struct TwoTokenDistribution {
  at::Tensor first;         // [V]
  at::Tensor second;        // [V]
  at::Tensor greedy_after;  // [V] int64
};

TwoTokenDistribution ExactDistribution(const model::Qwen35Model& target,
                                       const std::vector<int64_t>& prompt) {
  absl::StatusOr<model::Qwen35Cache> cache = target.NewCache(prompt.size() + 1);
  EXPECT_TRUE(cache.ok()) << cache.status();
  absl::StatusOr<model::ForwardOutput> prefill = target.Prefill(prompt, *cache);
  EXPECT_TRUE(prefill.ok()) << prefill.status();
  const int64_t vocab = target.config().vocab_size;
  TwoTokenDistribution exact{.first = at::softmax(prefill->logits[0].to(at::kDouble), 0),
                             .second = at::zeros({vocab}, at::kDouble),
                             .greedy_after = at::zeros({vocab}, at::kLong)};
  for (int64_t first = 0; first < vocab; ++first) {
    // A one-token block, then rolled back: the cache holds just the prompt again.
    absl::StatusOr<model::ForwardOutput> next = target.ForwardBlock({&first, 1}, *cache);
    EXPECT_TRUE(next.ok()) << next.status();
    EXPECT_TRUE(cache->Rollback(0).ok());
    const at::Tensor logits = next->logits[0].to(at::kDouble);
    exact.second += exact.first[first] * at::softmax(logits, 0);
    exact.greedy_after[first] = logits.argmax();
  }
  return exact;
}

struct ChiSquare {
  double statistic = 0;
  int64_t degrees_of_freedom = 0;
};

// Pearson's statistic of `counts` (histogram of kSamples draws) against `probabilities`; bins
// expecting fewer than 5 draws are pooled into one.
ChiSquare PearsonChiSquare(const std::vector<int64_t>& counts, const at::Tensor& probabilities) {
  ChiSquare result;
  double pooled_expected = 0;
  int64_t pooled_observed = 0;
  int64_t bins = 0;
  const auto add = [&](double expected, int64_t observed) {
    const double diff = static_cast<double>(observed) - expected;
    result.statistic += diff * diff / expected;
    ++bins;
  };
  for (size_t token = 0; token < counts.size(); ++token) {
    const double expected = kSamples * probabilities[token].item<double>();
    if (expected >= 5) {
      add(expected, counts[token]);
    } else {
      pooled_expected += expected;
      pooled_observed += counts[token];
    }
  }
  if (pooled_expected > 0) add(pooled_expected, pooled_observed);
  result.degrees_of_freedom = bins - 1;
  return result;
}

// The chi-square value exceeded with probability 0.001 (Wilson–Hilferty approximation).
double CriticalValue(int64_t degrees_of_freedom) {
  const double k = static_cast<double>(degrees_of_freedom);
  const double z = 3.0902;  // the standard normal's 0.999 quantile
  const double a = 2 / (9 * k);
  return k * std::pow(1 - a + z * std::sqrt(a), 3);
}

class SamplingDistributionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    target_ = testing::LoadTarget("qwen35-tiny-a");
    if (target_ == nullptr) return;
    prompt_ = testing::RandomPrompt(3, 8, target_->config().vocab_size);
    exact_ = ExactDistribution(*target_, prompt_);
  }
  static void TearDownTestSuite() {
    target_.reset();
    oracle_samples_.clear();
  }
  void SetUp() override { ASSERT_NE(target_, nullptr); }

  // The first two tokens of kSamples sampled outputs, one seed each.
  // With the oracle, whose drafts are accepted most often; sampled once for the suite.
  static const std::vector<std::vector<int64_t>>& OracleSamples() {
    if (oracle_samples_.empty()) {
      OracleDrafter oracle(*target_, kBlockSize);
      oracle_samples_ = Sample(oracle);
    }
    return oracle_samples_;
  }

  static std::vector<std::vector<int64_t>> Sample(const Drafter& drafter) {
    absl::StatusOr<Generator> decoder = Generator::Speculative(*target_, drafter, nullptr);
    EXPECT_TRUE(decoder.ok()) << decoder.status();
    if (!decoder.ok()) return {};
    std::vector<std::vector<int64_t>> samples;
    for (uint64_t seed = 0; seed < kSamples; ++seed) {
      absl::StatusOr<GenerationResult> result =
          decoder->Generate(testing::Request(prompt_, 2, /*temperature=*/1.0, seed));
      EXPECT_TRUE(result.ok()) << result.status();
      if (result.ok()) samples.push_back(result->ids);
    }
    return samples;
  }

  static std::vector<int64_t> Histogram(const std::vector<int64_t>& tokens) {
    std::vector<int64_t> counts(target_->config().vocab_size, 0);
    for (const int64_t token : tokens) ++counts[token];
    return counts;
  }

  static ::testing::AssertionResult Fits(const std::vector<int64_t>& tokens,
                                         const at::Tensor& probabilities) {
    const ChiSquare chi = PearsonChiSquare(Histogram(tokens), probabilities);
    const double critical = CriticalValue(chi.degrees_of_freedom);
    ::testing::AssertionResult result =
        chi.statistic <= critical ? ::testing::AssertionSuccess() : ::testing::AssertionFailure();
    return result << "chi-square " << chi.statistic << " on " << chi.degrees_of_freedom
                  << " degrees of freedom; critical value at 0.001: " << critical;
  }

  static inline std::unique_ptr<model::Qwen35Model> target_;
  static inline std::vector<int64_t> prompt_;
  static inline TwoTokenDistribution exact_;
  static inline std::vector<std::vector<int64_t>> oracle_samples_;
};

std::vector<int64_t> Column(const std::vector<std::vector<int64_t>>& samples, size_t index) {
  std::vector<int64_t> column;
  for (const std::vector<int64_t>& sample : samples) column.push_back(sample.at(index));
  return column;
}

TEST_F(SamplingDistributionTest, WithTheOracleBothTokensFollowTheTarget) {
  EXPECT_TRUE(Fits(Column(OracleSamples(), 0), exact_.first));
  EXPECT_TRUE(Fits(Column(OracleSamples(), 1), exact_.second));
}

TEST_F(SamplingDistributionTest, WithARandomDrafterBothTokensFollowTheTarget) {
  absl::StatusOr<model::DFlashDrafter> drafter = testing::RandomDrafter(
      *target_,
      {.num_layers = 1, .block_size = kBlockSize, .seed = 2, .mask_token_id = -1, .window = 0});
  ASSERT_TRUE(drafter.ok()) << drafter.status();
  absl::StatusOr<std::unique_ptr<DFlashBlockDrafter>> block =
      DFlashBlockDrafter::Create(*std::move(drafter), target_->token_head(), target_->config());
  ASSERT_TRUE(block.ok()) << block.status();
  const std::vector<std::vector<int64_t>> samples = Sample(**block);
  EXPECT_TRUE(Fits(Column(samples, 0), exact_.first));
  EXPECT_TRUE(Fits(Column(samples, 1), exact_.second));
}

TEST_F(SamplingDistributionTest, AcceptingDraftsUncheckedWouldFailTheTest) {
  // What an engine that took the oracle's draft without comparing it would emit second: the
  // greedy token after each sampled first token.
  std::vector<int64_t> unchecked;
  for (const int64_t first : Column(OracleSamples(), 0)) {
    unchecked.push_back(exact_.greedy_after[first].item<int64_t>());
  }
  EXPECT_FALSE(Fits(unchecked, exact_.second));
}

}  // namespace
}  // namespace specd::engine
