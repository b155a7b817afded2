// One forward over many sequences (continuous batching): each sequence's rows give bit for bit what
// they give when the sequence runs alone — a prompt chunk on an empty cache, a verify block that
// is then rolled back, a single decode token — and its cache ends where it would alone. Bit for
// bit, because a greedy request's output must not depend on what else runs.
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

using testing::MaxAbsDiff;

::testing::AssertionResult Identical(const at::Tensor& actual, const at::Tensor& expected) {
  if (actual.defined() != expected.defined()) {
    return ::testing::AssertionFailure() << "one of them is undefined";
  }
  if (!actual.defined() || at::equal(actual, expected)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max |difference| " << MaxAbsDiff(actual, expected);
}

class BatchedForwardTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::TinyFixture fixture = testing::LoadTinyFixture();
    model_ = std::move(fixture.model);
    ids_ = std::move(fixture.ids);
  }
  static void TearDownTestSuite() { model_.reset(); }

  void SetUp() override { ASSERT_NE(model_, nullptr); }

  static Qwen35Cache NewCache() {
    absl::StatusOr<Qwen35Cache> cache = model_->NewCache(256);
    EXPECT_TRUE(cache.ok()) << cache.status();
    return *std::move(cache);
  }

  static std::span<const int64_t> Ids(int64_t begin, int64_t end) {
    return std::span<const int64_t>(ids_).subspan(begin, end - begin);
  }

  // A cache that has seen ids [0, length).
  static Qwen35Cache Warm(int64_t length) {
    Qwen35Cache cache = NewCache();
    if (length > 0) {
      EXPECT_TRUE(model_->Prefill(Ids(0, length), cache).ok());
    }
    return cache;
  }

  static inline std::unique_ptr<Qwen35Model> model_;
  static inline std::vector<int64_t> ids_;
};

TEST_F(BatchedForwardTest, EverySequenceGetsWhatItGetsAlone) {
  const ForwardOptions all_rows{.logit_rows = LogitRows::kAll, .hidden_states = {0, 2}};
  const ForwardOptions last_row{.logit_rows = LogitRows::kLast, .hidden_states = {}};
  // A verify block after 30 tokens, a 7-token prompt chunk, one decode token after 20.
  Qwen35Cache block_alone = Warm(30), chunk_alone = Warm(0), decode_alone = Warm(20);
  Qwen35Cache block_batched = Warm(30), chunk_batched = Warm(0), decode_batched = Warm(20);
  const std::vector<SequenceInput> alone = {
      {.ids = Ids(30, 35), .cache = &block_alone, .options = all_rows, .keep_for_rollback = true},
      {.ids = Ids(0, 7), .cache = &chunk_alone, .options = last_row, .keep_for_rollback = false},
      {.ids = Ids(20, 21), .cache = &decode_alone, .options = all_rows, .keep_for_rollback = false},
  };
  std::vector<SequenceInput> batch = alone;
  batch[0].cache = &block_batched;
  batch[1].cache = &chunk_batched;
  batch[2].cache = &decode_batched;

  absl::StatusOr<std::vector<ForwardOutput>> batched = model_->ForwardBatch(batch);
  ASSERT_TRUE(batched.ok()) << batched.status();
  ASSERT_EQ(batched->size(), alone.size());
  for (size_t i = 0; i < alone.size(); ++i) {
    absl::StatusOr<std::vector<ForwardOutput>> single = model_->ForwardBatch({&alone[i], 1});
    ASSERT_TRUE(single.ok()) << single.status();
    const ForwardOutput& expected = single->front();
    const ForwardOutput& actual = (*batched)[i];
    EXPECT_TRUE(Identical(actual.logits, expected.logits)) << "sequence " << i;
    ASSERT_EQ(actual.hidden_states.size(), expected.hidden_states.size());
    for (size_t tap = 0; tap < expected.hidden_states.size(); ++tap) {
      EXPECT_TRUE(Identical(actual.hidden_states[tap], expected.hidden_states[tap]))
          << "sequence " << i << ", tap " << tap;
    }
    EXPECT_EQ(batch[i].cache->length(), alone[i].cache->length());
  }

  // Each cache goes on as it would alone: the block rolled back to two tokens, then one more.
  ASSERT_TRUE(block_batched.Rollback(2).ok());
  ASSERT_TRUE(block_alone.Rollback(2).ok());
  for (Qwen35Cache* cache : {&block_alone, &block_batched}) EXPECT_EQ(cache->length(), 32);
  const std::vector<std::pair<Qwen35Cache*, Qwen35Cache*>> pairs = {
      {&block_alone, &block_batched},
      {&chunk_alone, &chunk_batched},
      {&decode_alone, &decode_batched}};
  for (const auto& [cache_alone, cache_batched] : pairs) {
    const int64_t next = ids_[cache_alone->length()];
    absl::StatusOr<at::Tensor> expected = model_->Decode(next, *cache_alone);
    absl::StatusOr<at::Tensor> actual = model_->Decode(next, *cache_batched);
    ASSERT_TRUE(expected.ok() && actual.ok());
    EXPECT_TRUE(Identical(*actual, *expected)) << "at " << cache_alone->length();
  }
}

TEST_F(BatchedForwardTest, PrefillChunksWithoutLogitsAskForNoHead) {
  Qwen35Cache cache = NewCache();
  const SequenceInput chunk{.ids = Ids(0, 9),
                            .cache = &cache,
                            .options = {.logit_rows = LogitRows::kNone, .hidden_states = {1}},
                            .keep_for_rollback = false};
  absl::StatusOr<std::vector<ForwardOutput>> output = model_->ForwardBatch({&chunk, 1});
  ASSERT_TRUE(output.ok()) << output.status();
  EXPECT_FALSE(output->front().logits.defined());
  ASSERT_EQ(output->front().hidden_states.size(), 1u);
  EXPECT_EQ(output->front().hidden_states[0].size(0), 9);
  EXPECT_EQ(cache.length(), 9);
}

TEST_F(BatchedForwardTest, ABadSequenceFailsTheBatchBeforeAnyCacheChanges) {
  Qwen35Cache first = Warm(10), second = Warm(10);
  const int64_t outside = model_->config().vocab_size;
  const std::vector<SequenceInput> shared = {{.ids = Ids(10, 12), .cache = &first},
                                             {.ids = Ids(12, 14), .cache = &first}};
  EXPECT_EQ(model_->ForwardBatch(shared).status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<SequenceInput> bad_id = {{.ids = Ids(10, 12), .cache = &first},
                                             {.ids = {&outside, 1}, .cache = &second}};
  EXPECT_EQ(model_->ForwardBatch(bad_id).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(first.length(), 10);
  EXPECT_EQ(second.length(), 10);
}

}  // namespace
}  // namespace specd::model
