// Checkpoints of shapes the fixture does not have — GQA groups of 3, three DeltaNet value heads
// per key head, key and value head dims that differ, half-rotary heads, an untied head, an
// irregular layer pattern — load from both layouts (and from shards) and compute the same.
#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/model/ops/op_table.h"
#include "common/model/qwen35_model.h"
#include "common/model/synthetic/random_checkpoint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/odd_qwen35_shapes.h"
#include "tests/unit/common/model/tensor_matchers.h"

namespace specd::model {
namespace {

using testing::AllClose;

class CheckpointLayoutsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = std::filesystem::path(::testing::TempDir()) /
            (std::string("specd_model_") + test->test_suite_name() + "_" + test->name());
    std::filesystem::remove_all(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  std::filesystem::path Write(const std::string& name, const io::Qwen35TextConfig& config,
                              const RandomCheckpointOptions& options) {
    const std::filesystem::path dir = root_ / name;
    std::filesystem::create_directories(dir);
    const absl::Status status = WriteRandomQwen35Checkpoint(dir, config, options);
    EXPECT_TRUE(status.ok()) << status;
    return dir;
  }

  std::filesystem::path root_;
};

// Logits of every path an engine uses, one after another on one cache.
struct PathLogits {
  at::Tensor prefill;  // [T, vocab] for all of `ids`
  std::vector<at::Tensor> hidden_states;
  at::Tensor decode;  // [T - split, vocab] prefill ids[:split], then one token at a time
  at::Tensor block;   // [T - split, vocab] prefill ids[:split], then one block
};

PathLogits RunAllPaths(const Qwen35Model& model, const std::vector<int64_t>& ids, int64_t split) {
  PathLogits result;
  absl::StatusOr<Qwen35Cache> cache = model.NewCache(static_cast<int64_t>(ids.size()));
  EXPECT_TRUE(cache.ok()) << cache.status();
  ForwardOptions all{.logit_rows = LogitRows::kAll, .hidden_states = {}};
  for (int64_t i = 0; i <= model.config().num_hidden_layers; ++i) all.hidden_states.push_back(i);
  absl::StatusOr<ForwardOutput> prefill = model.Prefill(ids, *cache, all);
  EXPECT_TRUE(prefill.ok()) << prefill.status();
  result.prefill = prefill->logits;
  result.hidden_states = prefill->hidden_states;

  const std::span<const int64_t> all_ids(ids);
  EXPECT_TRUE(model.Prefill(all_ids.first(split), *cache).ok());
  std::vector<at::Tensor> steps;
  for (size_t t = split; t < ids.size(); ++t) steps.push_back(*model.Decode(ids[t], *cache));
  result.decode = at::stack(steps);

  EXPECT_TRUE(model.Prefill(all_ids.first(split), *cache).ok());
  absl::StatusOr<ForwardOutput> block = model.ForwardBlock(
      all_ids.subspan(split), *cache, {.logit_rows = LogitRows::kAll, .hidden_states = {}});
  EXPECT_TRUE(block.ok()) << block.status();
  result.block = block->logits;
  return result;
}

std::vector<int64_t> SomeIds(int64_t count, int64_t vocab) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < count; ++i) ids.push_back((i * 37 + 11) % vocab);
  return ids;
}

TEST_F(CheckpointLayoutsTest, BothLayoutsLoadAndComputeTheSame) {
  const io::Qwen35TextConfig config = specd::testing::OddQwen35Shapes();
  const auto causal_lm =
      Write("causal_lm", config, {.layout = CheckpointLayout::kCausalLm, .seed = 5});
  const auto wrapped = Write(
      "wrapped", config,
      // Small shards: the wrapper layout is also read through a shard index.
      {.layout = CheckpointLayout::kConditionalGeneration, .seed = 5, .max_shard_bytes = 40'000});
  ASSERT_TRUE(std::filesystem::exists(wrapped / "model.safetensors.index.json"));

  absl::StatusOr<Qwen35Model> from_causal_lm = Qwen35Model::Load(causal_lm);
  ASSERT_TRUE(from_causal_lm.ok()) << from_causal_lm.status();
  absl::StatusOr<Qwen35Model> from_wrapped = Qwen35Model::Load(wrapped);
  ASSERT_TRUE(from_wrapped.ok()) << from_wrapped.status();
  EXPECT_EQ(from_wrapped->config().tensor_prefix, "model.language_model.");

  const std::vector<int64_t> ids = SomeIds(90, config.vocab_size);
  const PathLogits a = RunAllPaths(*from_causal_lm, ids, 70);
  const PathLogits b = RunAllPaths(*from_wrapped, ids, 70);
  EXPECT_TRUE(at::equal(a.prefill, b.prefill));
  EXPECT_TRUE(at::equal(a.decode, b.decode));
  EXPECT_TRUE(at::equal(a.block, b.block));
  ASSERT_EQ(a.hidden_states.size(), b.hidden_states.size());
  for (size_t i = 0; i < a.hidden_states.size(); ++i) {
    EXPECT_TRUE(at::equal(a.hidden_states[i], b.hidden_states[i])) << "hidden state " << i;
  }
}

TEST_F(CheckpointLayoutsTest, DecodeAndBlockAgreeWithPrefillForOtherShapes) {
  const io::Qwen35TextConfig config = specd::testing::OddQwen35Shapes();
  absl::StatusOr<Qwen35Model> model = Qwen35Model::Load(Write("model", config, {.seed = 9}));
  ASSERT_TRUE(model.ok()) << model.status();
  // 90 tokens: the prefill spans two DeltaNet chunks; the 20-token block continues inside one.
  const PathLogits paths = RunAllPaths(*model, SomeIds(90, config.vocab_size), 70);
  const at::Tensor tail = paths.prefill.narrow(0, 70, 20);
  EXPECT_TRUE(AllClose(paths.decode, tail, 1e-3));
  EXPECT_TRUE(AllClose(paths.block, tail, 1e-3));
}

TEST_F(CheckpointLayoutsTest, Bfloat16MatricesStayBfloat16AndComputeAsIfWidened) {
  const io::Qwen35TextConfig config = specd::testing::OddQwen35Shapes();
  absl::StatusOr<Qwen35Model> f32 = Qwen35Model::Load(Write("f32", config, {.seed = 3}));
  absl::StatusOr<Qwen35Model> bf16 =
      Qwen35Model::Load(Write("bf16", config, {.seed = 3, .dtype = io::DType::kBF16}));
  ASSERT_TRUE(f32.ok()) << f32.status();
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  // Held as stored, half the bytes of float32; embedded rows come out widened, exactly.
  EXPECT_EQ(bf16->token_head().embed_tokens().scalar_type(), at::kBFloat16);
  EXPECT_EQ(bf16->token_head().lm_head().scalar_type(), at::kBFloat16);
  const at::Tensor ids = at::arange(config.vocab_size);
  EXPECT_EQ(bf16->Embed(ids).scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(bf16->Embed(ids), f32->Embed(ids).to(at::kBFloat16).to(at::kFloat)));
  // Every path gives what the reference gives with the weights widened to float32: float32 both
  // ways, but the reference runs the delta rule in its chunked WY form (a triangular solve per
  // chunk) where the kernels run the recurrence, as DecodeAndBlockAgreeWithPrefill compares paths
  // (measured up to 1.03e-4 with PyPI's LibTorch 2.11 and its MKL). Activations rounded to bf16
  // on the way would differ by orders of magnitude more (up to 3.7 on the dense fixture's logits).
  const std::vector<int64_t> prompt = SomeIds(90, config.vocab_size);
  const PathLogits kernels = RunAllPaths(*bf16, prompt, 70);
  ops::UseReferenceOnly(true);
  const PathLogits reference = RunAllPaths(*bf16, prompt, 70);
  ops::UseReferenceOnly(false);
  EXPECT_TRUE(AllClose(kernels.prefill, reference.prefill, 1e-3));
  EXPECT_TRUE(AllClose(kernels.decode, reference.decode, 1e-3));
  EXPECT_TRUE(AllClose(kernels.block, reference.block, 1e-3));
}

TEST_F(CheckpointLayoutsTest, MisShapedTensorIsNamedWithBothShapes) {
  io::Qwen35TextConfig config = specd::testing::OddQwen35Shapes();
  const auto dir = Write("model", config, {.seed = 1});
  config.intermediate_size = 96;
  absl::StatusOr<io::Checkpoint> checkpoint = io::Checkpoint::Open(dir);
  ASSERT_TRUE(checkpoint.ok());
  config.tensor_prefix = "model.";
  const absl::Status status = Qwen35Model::Load(config, *checkpoint).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              ::testing::AllOf(::testing::HasSubstr("model.layers.0.mlp.gate_proj.weight"),
                               ::testing::HasSubstr("[80, 48]"), ::testing::HasSubstr("[96, 48]")));
}

TEST_F(CheckpointLayoutsTest, MissingHeadIsNamed) {
  io::Qwen35TextConfig config = specd::testing::OddQwen35Shapes();
  config.tie_word_embeddings = true;  // written without lm_head.weight
  const auto dir = Write("model", config, {.seed = 1});
  absl::StatusOr<io::Checkpoint> checkpoint = io::Checkpoint::Open(dir);
  ASSERT_TRUE(checkpoint.ok());
  config.tie_word_embeddings = false;
  config.tensor_prefix = "model.";
  const absl::Status status = Qwen35Model::Load(config, *checkpoint).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("lm_head.weight"));
}

}  // namespace
}  // namespace specd::model
