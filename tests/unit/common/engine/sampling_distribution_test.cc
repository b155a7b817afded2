// At temperature 1 speculative decoding samples from the target's distribution: the second
// generated token, the first that a draft can supply, follows the exact distribution computed
// from the target (Pearson's chi-square over a fixed set of seeds, so the test is deterministic),
// under sample and match and under rejection sampling. The same test rejects the samples of an
// engine that accepted drafts without comparing them to the target's choice, so the threshold is
// one a wrong acceptance rule fails.
#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "common/engine/dflash_block_drafter.h"
#include "common/engine/generator.h"
#include "common/engine/oracle_drafter.h"
#include "gtest/gtest.h"
#include "tests/unit/common/engine/chi_square.h"
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

  // With the oracle, whose drafts are accepted most often; sampled once for the suite.
  static const std::vector<std::vector<int64_t>>& OracleSamples() {
    if (oracle_samples_.empty()) {
      OracleDrafter oracle(*target_, kBlockSize);
      oracle_samples_ = Sample(oracle);
    }
    return oracle_samples_;
  }

  // The first three tokens of kSamples sampled outputs, one seed each: the prefill's, then one
  // step that drafts the second. `accepted` (if any) counts the drafts accepted.
  static std::vector<std::vector<int64_t>> Sample(const Drafter& drafter,
                                                  const DraftOptions& options = {},
                                                  int64_t* accepted = nullptr) {
    absl::StatusOr<Generator> decoder = Generator::Speculative(*target_, drafter, nullptr, options);
    EXPECT_TRUE(decoder.ok()) << decoder.status();
    if (!decoder.ok()) return {};
    std::vector<std::vector<int64_t>> samples;
    for (uint64_t seed = 0; seed < kSamples; ++seed) {
      absl::StatusOr<GenerationResult> result =
          decoder->Generate(testing::Request(prompt_, 3, /*temperature=*/1.0, seed));
      EXPECT_TRUE(result.ok()) << result.status();
      if (!result.ok()) continue;
      samples.push_back(result->ids);
      if (accepted != nullptr && !result->acceptance->accepted_at.empty()) {
        *accepted += result->acceptance->accepted_at.front();
      }
    }
    return samples;
  }

  static std::unique_ptr<DFlashBlockDrafter> RandomBlockDrafter() {
    return testing::BlockDrafter(testing::RandomDrafter(*target_, {.num_layers = 1,
                                                                   .block_size = kBlockSize,
                                                                   .seed = 2,
                                                                   .mask_token_id = -1,
                                                                   .window = 0}),
                                 *target_);
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
  EXPECT_TRUE(testing::FitsDistribution(Column(OracleSamples(), 0), exact_.first));
  EXPECT_TRUE(testing::FitsDistribution(Column(OracleSamples(), 1), exact_.second));
}

TEST_F(SamplingDistributionTest, WithARandomDrafterBothTokensFollowTheTarget) {
  const std::unique_ptr<DFlashBlockDrafter> drafter = RandomBlockDrafter();
  ASSERT_NE(drafter, nullptr);
  const std::vector<std::vector<int64_t>> samples = Sample(*drafter);
  EXPECT_TRUE(testing::FitsDistribution(Column(samples, 0), exact_.first));
  EXPECT_TRUE(testing::FitsDistribution(Column(samples, 1), exact_.second));
}

TEST_F(SamplingDistributionTest, UnderRejectionSamplingBothTokensFollowTheTarget) {
  // The oracle draws its drafts from the target's own distribution (over its most likely tokens),
  // so most are accepted; the random drafter's are nearly all rejected and replaced from the
  // residual. Either way the output is the target's.
  OracleDrafter oracle(*target_, kBlockSize);
  const std::unique_ptr<DFlashBlockDrafter> random = RandomBlockDrafter();
  ASSERT_NE(random, nullptr);
  for (const Drafter* drafter : std::initializer_list<const Drafter*>{&oracle, random.get()}) {
    int64_t accepted = 0;
    const std::vector<std::vector<int64_t>> samples =
        Sample(*drafter, {.rejection_sampling = true}, &accepted);
    if (drafter == &oracle) {
      EXPECT_GT(accepted, kSamples / 3);
    }
    EXPECT_TRUE(testing::FitsDistribution(Column(samples, 0), exact_.first));
    EXPECT_TRUE(testing::FitsDistribution(Column(samples, 1), exact_.second));
  }
}

TEST_F(SamplingDistributionTest, AcceptingDraftsUncheckedWouldFailTheTest) {
  // What an engine that took the oracle's draft without comparing it would emit second: the
  // greedy token after each sampled first token.
  std::vector<int64_t> unchecked;
  for (const int64_t first : Column(OracleSamples(), 0)) {
    unchecked.push_back(exact_.greedy_after[first].item<int64_t>());
  }
  EXPECT_FALSE(testing::FitsDistribution(unchecked, exact_.second));
}

}  // namespace
}  // namespace specd::engine
