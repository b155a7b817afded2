// With ModelOptions::cuda_graphs, decode steps and verify blocks take the form a CUDA graph replays
// at later positions: positions read from a tensor, keys and values written at them, attention
// over a cache's whole length under a mask, a rolled-back block's accepted rows replayed before the
// forward rather than in it, and the block a verify forward keeps handed back as outputs. A CPU
// captures nothing, so here the form is what runs, and it predicts what the exact forwards predict:
// alone, batched, as the batch changes, through speculation rounds rolled back to every length,
// taps included. The capture and replay themselves are tested on a GPU
// (tests/gpu/model_on_cuda_test.cc).
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/model/qwen35_model.h"
#include "gtest/gtest.h"
#include "tests/unit/common/model/tensor_matchers.h"
#include "tests/unit/common/model/tiny_fixture.h"

namespace specd::model {
namespace {

using testing::AllClose;

class ReplayableForwardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::TinyFixture exact = testing::LoadTinyFixture("qwen35-tiny-a");
    testing::TinyFixture replayable =
        testing::LoadTinyFixture("qwen35-tiny-a", {.cuda_graphs = true});
    ASSERT_TRUE(exact.model != nullptr && replayable.model != nullptr);
    exact_ = std::move(exact.model);
    replayable_ = std::move(replayable.model);
    ids_ = std::move(exact.ids);
  }

  // The same sequence on either model: a cache of each, warmed with ids [0, length).
  struct Pair {
    Qwen35Cache exact;
    Qwen35Cache replayable;
  };
  Pair Warm(int64_t length) const {
    const std::vector<int64_t> prompt(ids_.begin(), ids_.begin() + length);
    absl::StatusOr<Qwen35Cache> exact = exact_->NewCache(128);
    absl::StatusOr<Qwen35Cache> replayable = replayable_->NewCache(128);
    EXPECT_TRUE(exact.ok() && replayable.ok());
    EXPECT_TRUE(exact_->Prefill(prompt, *exact).ok());
    EXPECT_TRUE(replayable_->Prefill(prompt, *replayable).ok());
    return {*std::move(exact), *std::move(replayable)};
  }

  // One forward of `pairs` batched on each model, each fed its next `rows` ids (a verify block,
  // kept for rollback, when more than one) and asking for every row's logits and `taps`, as the
  // engine's steps do; expects the same predictions and taps from both.
  void Forward(const std::vector<Pair*>& pairs, int64_t rows,
               const std::vector<int64_t>& taps = {}) const {
    const ForwardOptions options{.logit_rows = LogitRows::kAll, .hidden_states = taps};
    std::vector<SequenceInput> exact_batch, replayable_batch;
    for (Pair* pair : pairs) {
      const std::span<const int64_t> next(&ids_[pair->exact.length()], rows);
      exact_batch.push_back(
          {.ids = next, .cache = &pair->exact, .options = options, .keep_for_rollback = rows > 1});
      replayable_batch.push_back({.ids = next,
                                  .cache = &pair->replayable,
                                  .options = options,
                                  .keep_for_rollback = rows > 1});
    }
    absl::StatusOr<std::vector<ForwardOutput>> exact = exact_->ForwardBatch(exact_batch);
    absl::StatusOr<std::vector<ForwardOutput>> replayable =
        replayable_->ForwardBatch(replayable_batch);
    ASSERT_TRUE(exact.ok() && replayable.ok());
    for (size_t i = 0; i < pairs.size(); ++i) {
      const ForwardOutput& expected = (*exact)[i];
      const ForwardOutput& actual = (*replayable)[i];
      EXPECT_TRUE(AllClose(actual.logits, expected.logits, 1e-4))
          << "sequence " << i << " at " << pairs[i]->exact.length();
      EXPECT_TRUE(actual.logits.argmax(-1).equal(expected.logits.argmax(-1)));
      ASSERT_EQ(actual.hidden_states.size(), taps.size());
      for (size_t tap = 0; tap < taps.size(); ++tap) {
        EXPECT_TRUE(AllClose(actual.hidden_states[tap], expected.hidden_states[tap], 1e-4))
            << "tap " << taps[tap];
      }
      EXPECT_EQ(pairs[i]->replayable.length(), pairs[i]->exact.length());
    }
  }

  static void Rollback(Pair& pair, int64_t accepted) {
    ASSERT_TRUE(pair.exact.Rollback(accepted).ok());
    ASSERT_TRUE(pair.replayable.Rollback(accepted).ok());
  }

  std::unique_ptr<Qwen35Model> exact_;
  std::unique_ptr<Qwen35Model> replayable_;
  std::vector<int64_t> ids_;
};

TEST_F(ReplayableForwardTest, DecodeStepsPredictWhatExactOnesDoAsTheBatchChanges) {
  Pair a = Warm(20), b = Warm(30), c = Warm(7);
  for (int step = 0; step < 3; ++step) Forward({&a}, 1);
  for (int step = 0; step < 3; ++step) Forward({&a, &b}, 1);
  for (int step = 0; step < 3; ++step) Forward({&c, &a, &b}, 1);
  Forward({&b}, 1);
}

// Verify blocks rolled back to every length (a whole block accepted included), a decode step after
// a rolled-back block, two sequences at different points of theirs.
TEST_F(ReplayableForwardTest, SpeculationRoundsPredictWhatExactOnesDo) {
  constexpr int64_t kBlock = 5;
  const std::vector<int64_t> taps = {1, 3};
  Pair a = Warm(20), b = Warm(9);
  for (int64_t accepted = 0; accepted <= kBlock; ++accepted) {
    Forward({&a, &b}, kBlock, taps);
    Rollback(a, accepted);
    Rollback(b, kBlock - accepted);
  }
  Forward({&a}, 1, taps);
  Forward({&b, &a}, kBlock, taps);
  Rollback(b, 2);
  Rollback(a, kBlock);
  Forward({&a, &b}, 1);
}

}  // namespace
}  // namespace specd::model
