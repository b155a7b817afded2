// With ModelOptions::cuda_graphs, decode steps take the form a CUDA graph replays at later
// positions: positions read from a tensor, keys and values written at them, attention over a
// cache's whole length under a mask. A CPU captures nothing, so here the form is what runs, and it
// predicts what the exact steps predict: alone, batched, as the batch changes, and after a verify
// block rolled back (whose forward, and the replaying step after it, take the exact form). The
// capture and replay themselves are tested on a GPU (tests/gpu/model_on_cuda_test.cc).
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "common/model/qwen35_model.h"
#include "gtest/gtest.h"
#include "tests/unit/common/model/tensor_matchers.h"
#include "tests/unit/common/model/tiny_fixture.h"

namespace specd::model {
namespace {

using testing::AllClose;

class ReplayableDecodeTest : public ::testing::Test {
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

  // One decode step of `pairs` batched on each model, each fed its next id and asking for its
  // row's logits as the engine's target-only steps do; expects the same predictions from both.
  void Step(const std::vector<Pair*>& pairs) const {
    const ForwardOptions all_rows{.logit_rows = LogitRows::kAll, .hidden_states = {}};
    std::vector<SequenceInput> exact_batch, replayable_batch;
    for (Pair* pair : pairs) {
      const std::span<const int64_t> next(&ids_[pair->exact.length()], 1);
      exact_batch.push_back({.ids = next, .cache = &pair->exact, .options = all_rows});
      replayable_batch.push_back({.ids = next, .cache = &pair->replayable, .options = all_rows});
    }
    absl::StatusOr<std::vector<ForwardOutput>> exact = exact_->ForwardBatch(exact_batch);
    absl::StatusOr<std::vector<ForwardOutput>> replayable =
        replayable_->ForwardBatch(replayable_batch);
    ASSERT_TRUE(exact.ok() && replayable.ok());
    for (size_t i = 0; i < pairs.size(); ++i) {
      const at::Tensor& expected = (*exact)[i].logits;
      const at::Tensor& actual = (*replayable)[i].logits;
      EXPECT_TRUE(AllClose(actual, expected, 1e-4))
          << "sequence " << i << " at " << pairs[i]->exact.length();
      EXPECT_TRUE(actual.argmax(-1).equal(expected.argmax(-1)));
      EXPECT_EQ(pairs[i]->replayable.length(), pairs[i]->exact.length());
    }
  }

  std::unique_ptr<Qwen35Model> exact_;
  std::unique_ptr<Qwen35Model> replayable_;
  std::vector<int64_t> ids_;
};

TEST_F(ReplayableDecodeTest, PredictsWhatExactDecodeStepsDoAsTheBatchChanges) {
  Pair a = Warm(20), b = Warm(30), c = Warm(7);
  for (int step = 0; step < 3; ++step) Step({&a});
  for (int step = 0; step < 3; ++step) Step({&a, &b});
  for (int step = 0; step < 3; ++step) Step({&c, &a, &b});
  Step({&b});
}

TEST_F(ReplayableDecodeTest, PredictsWhatExactDecodeStepsDoAfterARolledBackBlock) {
  Pair a = Warm(20);
  Step({&a});
  const std::vector<int64_t> block(ids_.begin() + a.exact.length(),
                                   ids_.begin() + a.exact.length() + 5);
  ASSERT_TRUE(exact_->ForwardBlock(block, a.exact).ok());
  ASSERT_TRUE(replayable_->ForwardBlock(block, a.replayable).ok());
  ASSERT_TRUE(a.exact.Rollback(2).ok() && a.replayable.Rollback(2).ok());
  for (int step = 0; step < 3; ++step) Step({&a});
}

}  // namespace
}  // namespace specd::model
