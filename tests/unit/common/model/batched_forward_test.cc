// One forward over many sequences (continuous batching): each sequence's rows give bit for bit what
// they give when the sequence runs alone — a prompt chunk on an empty cache, a verify block that
// is then rolled back, a single decode token — and its cache ends where it would alone; and a
// verify block scores its tokens bit for bit as decode steps would. Bit for bit, because a greedy
// request's output must depend neither on what else runs nor on speculation: no op's result for
// a row may depend on the rows beside it (the INT4 kernels' tiles and panels, the head's product,
// the gates, the rotary angles). On the dense fixture, and on the W4A16 one in every INT4
// activation mode this CPU runs.
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/model/qwen35_model.h"
#include "gtest/gtest.h"
#include "kernels/cpu/bf16_gemm.h"
#include "kernels/cpu/vnni_gemm.h"
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

struct FixtureModel {
  std::string name;  // the test's
  std::string fixture;
  ModelOptions options;
};

std::vector<FixtureModel> FixtureModels() {
  std::vector<FixtureModel> models = {{"dense", "qwen35-tiny-a", {}},
                                      {"w4a16_exact", "qwen35-tiny-a-w4a16", {}}};
  if (kernels::cpu::CpuHasBf16Gemm()) {
    models.push_back(
        {"w4a16_bf16", "qwen35-tiny-a-w4a16", {.int4_activations = quant::Int4Activations::kBf16}});
  }
  if (kernels::cpu::BestVnniGemmIsa() != kernels::cpu::VnniGemmIsa::kNone) {
    models.push_back(
        {"w4a16_int8_int8_head",
         "qwen35-tiny-a-w4a16",
         {.int4_activations = quant::Int4Activations::kInt8, .head = HeadWeights::kInt8}});
  }
  return models;
}

class BatchedForwardTest : public ::testing::TestWithParam<FixtureModel> {
 protected:
  void SetUp() override {
    testing::TinyFixture fixture = testing::LoadTinyFixture(GetParam().fixture, GetParam().options);
    ASSERT_NE(fixture.model, nullptr);
    model_ = std::move(fixture.model);
    ids_ = std::move(fixture.ids);
  }

  Qwen35Cache NewCache() const {
    absl::StatusOr<Qwen35Cache> cache = model_->NewCache(256);
    EXPECT_TRUE(cache.ok()) << cache.status();
    return *std::move(cache);
  }

  std::span<const int64_t> Ids(int64_t begin, int64_t end) const {
    return std::span<const int64_t>(ids_).subspan(begin, end - begin);
  }

  // A cache that has seen ids [0, length).
  Qwen35Cache Warm(int64_t length) const {
    Qwen35Cache cache = NewCache();
    if (length > 0) {
      EXPECT_TRUE(model_->Prefill(Ids(0, length), cache).ok());
    }
    return cache;
  }

  std::unique_ptr<Qwen35Model> model_;
  std::vector<int64_t> ids_;
};

TEST_P(BatchedForwardTest, EverySequenceGetsWhatItGetsAlone) {
  const ForwardOptions all_rows{.logit_rows = LogitRows::kAll, .hidden_states = {0, 2}};
  const ForwardOptions last_row{.logit_rows = LogitRows::kLast, .hidden_states = {}};
  // A verify block after 30 tokens, a 30-token prompt chunk, one decode token after 20: 36 rows,
  // past the 32 from which the exact INT4 kernel reads its weights from panels.
  Qwen35Cache block_alone = Warm(30), chunk_alone = Warm(0), decode_alone = Warm(20);
  Qwen35Cache block_batched = Warm(30), chunk_batched = Warm(0), decode_batched = Warm(20);
  const std::vector<SequenceInput> alone = {
      {.ids = Ids(30, 35), .cache = &block_alone, .options = all_rows, .keep_for_rollback = true},
      {.ids = Ids(0, 30), .cache = &chunk_alone, .options = last_row, .keep_for_rollback = false},
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

TEST_P(BatchedForwardTest, AVerifyBlockScoresItsTokensBitForBitAsDecodeSteps) {
  constexpr int64_t kStart = 30, kBlock = 16;
  Qwen35Cache stepped = Warm(kStart), blocked = Warm(kStart);
  std::vector<at::Tensor> steps;
  for (const int64_t id : Ids(kStart, kStart + kBlock)) {
    absl::StatusOr<at::Tensor> logits = model_->Decode(id, stepped);
    ASSERT_TRUE(logits.ok()) << logits.status();
    steps.push_back(*logits);
  }
  absl::StatusOr<ForwardOutput> block = model_->ForwardBlock(
      Ids(kStart, kStart + kBlock), blocked, {.logit_rows = LogitRows::kAll, .hidden_states = {}});
  ASSERT_TRUE(block.ok()) << block.status();
  EXPECT_TRUE(Identical(block->logits, at::stack(steps)));
}

TEST_P(BatchedForwardTest, PrefillChunksWithoutLogitsAskForNoHead) {
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

TEST_P(BatchedForwardTest, ABadSequenceFailsTheBatchBeforeAnyCacheChanges) {
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

INSTANTIATE_TEST_SUITE_P(Models, BatchedForwardTest, ::testing::ValuesIn(FixtureModels()),
                         [](const ::testing::TestParamInfo<FixtureModel>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace specd::model
