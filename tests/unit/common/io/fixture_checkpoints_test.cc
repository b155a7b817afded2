// The reader on checkpoints written by transformers and llm-compressor (see fixtures/README.md).
#include <cstring>
#include <vector>

#include "common/io/checkpoint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"

namespace specd::io {
namespace {

using ::testing::ElementsAre;

Checkpoint OpenFixture(const char* name) {
  absl::StatusOr<Checkpoint> checkpoint =
      Checkpoint::Open(specd::testing::SharedDir() / "fixtures" / name);
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
  return *std::move(checkpoint);
}

void ExpectTensor(const Checkpoint& checkpoint, const std::string& name, DType dtype,
                  const std::vector<int64_t>& shape) {
  const TensorView* tensor = checkpoint.Find(name);
  ASSERT_NE(tensor, nullptr) << name;
  EXPECT_EQ(tensor->dtype, dtype) << name;
  EXPECT_EQ(tensor->shape, shape) << name;
}

TEST(FixtureCheckpointsTest, ReadsTheQwen35Target) {
  const Checkpoint checkpoint = OpenFixture("qwen35-tiny-a");
  EXPECT_EQ(checkpoint.tensors().size(), 55u);
  ExpectTensor(checkpoint, "model.embed_tokens.weight", DType::kF32, {320, 64});
  ExpectTensor(checkpoint, "model.layers.0.linear_attn.in_proj_qkv.weight", DType::kF32, {128, 64});
  ExpectTensor(checkpoint, "model.layers.0.linear_attn.conv1d.weight", DType::kF32, {128, 1, 4});
  ExpectTensor(checkpoint, "model.layers.3.self_attn.q_proj.weight", DType::kF32, {256, 64});
  ExpectTensor(checkpoint, "model.norm.weight", DType::kF32, {64});
  EXPECT_EQ(checkpoint.Find("lm_head.weight"), nullptr);  // tied to the embedding
}

TEST(FixtureCheckpointsTest, ReadsTheW4A16PackedTarget) {
  const Checkpoint checkpoint = OpenFixture("qwen35-tiny-a-w4a16");
  // down_proj: N = 64 outputs, K = 128 inputs, groups of 32.
  ExpectTensor(checkpoint, "model.layers.0.mlp.down_proj.weight_packed", DType::kI32, {64, 16});
  ExpectTensor(checkpoint, "model.layers.0.mlp.down_proj.weight_scale", DType::kBF16, {64, 4});
  ExpectTensor(checkpoint, "model.layers.0.mlp.down_proj.weight_shape", DType::kI64, {2});
  ExpectTensor(checkpoint, "model.layers.0.linear_attn.in_proj_a.weight", DType::kF32, {4, 64});
  EXPECT_EQ(checkpoint.Find("model.layers.0.mlp.down_proj.weight"), nullptr);

  const TensorView& weight_shape = *checkpoint.Find("model.layers.0.mlp.down_proj.weight_shape");
  std::vector<int64_t> original_shape(2);
  std::memcpy(original_shape.data(), weight_shape.bytes.data(), weight_shape.bytes.size());
  EXPECT_THAT(original_shape, ElementsAre(64, 128));
}

TEST(FixtureCheckpointsTest, ReadsTheDFlashDrafter) {
  const Checkpoint checkpoint = OpenFixture("dflash-tiny-a");
  EXPECT_EQ(checkpoint.tensors().size(), 25u);
  ExpectTensor(checkpoint, "fc.weight", DType::kF32, {64, 128});
  ExpectTensor(checkpoint, "hidden_norm.weight", DType::kF32, {64});
  ExpectTensor(checkpoint, "layers.1.self_attn.k_proj.weight", DType::kF32, {32, 64});
  EXPECT_EQ(checkpoint.Find("embed_tokens.weight"), nullptr);  // uses the target's
}

}  // namespace
}  // namespace specd::io
