#include "common/io/checkpoint_summary.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"

namespace specd::io {
namespace {

using ::testing::HasSubstr;

CheckpointSummary SummarizeFixture(const char* name) {
  absl::StatusOr<CheckpointSummary> summary =
      SummarizeCheckpoint(specd::testing::SharedDir() / "fixtures" / name);
  EXPECT_TRUE(summary.ok()) << summary.status();
  return summary.ok() ? *std::move(summary) : CheckpointSummary{};
}

TEST(CheckpointSummaryTest, SummarisesTheTarget) {
  const CheckpointSummary summary = SummarizeFixture("qwen35-tiny-a");
  EXPECT_TRUE(std::holds_alternative<Qwen35TextConfig>(summary.model));
  EXPECT_EQ(summary.tensor_count, 55);
  EXPECT_EQ(summary.shard_count, 1);
  EXPECT_EQ(summary.total_bytes, 817952);  // the data section of model.safetensors
  EXPECT_EQ(summary.usage_by_dtype.at(DType::kF32).tensor_count, 55);
  EXPECT_FALSE(summary.quantization.has_value());

  const nlohmann::json json = SummaryToJson(summary);
  EXPECT_EQ(json["architecture"], "Qwen3_5ForCausalLM");
  EXPECT_EQ(json["num_layers"], 4);
  EXPECT_EQ(json["layer_types"]["linear_attention"], 3);
  EXPECT_EQ(json["layer_types"]["full_attention"], 1);
  EXPECT_EQ(json["tie_word_embeddings"], true);
  EXPECT_EQ(json["tensors"]["by_dtype"]["F32"]["bytes"], 817952);
  EXPECT_TRUE(json["quantization"].is_null());

  const std::string text = SummaryToText(summary);
  EXPECT_THAT(text, HasSubstr("layers           4 (1 full_attention, 3 linear_attention)\n"));
  EXPECT_THAT(text, HasSubstr("tensors          55 in 1 shard, 817952 bytes (798.8 KiB)\n"));
  EXPECT_THAT(text, HasSubstr("quantization     none\n"));
}

TEST(CheckpointSummaryTest, SummarisesTheW4A16Target) {
  const CheckpointSummary summary = SummarizeFixture("qwen35-tiny-a-w4a16");
  EXPECT_EQ(summary.usage_by_dtype.at(DType::kI32).tensor_count,
            25);  // 6 linears in each of 3 DeltaNet layers, 7 in the attention layer
  EXPECT_EQ(summary.usage_by_dtype.at(DType::kBF16).tensor_count, 25);
  EXPECT_EQ(summary.usage_by_dtype.at(DType::kI64).tensor_count, 25);

  const nlohmann::json json = SummaryToJson(summary);
  EXPECT_EQ(json["quantization"]["groups"][0]["scheme"], "W4A16");
  EXPECT_EQ(json["quantization"]["groups"][0]["weights"]["group_size"], 32);
  EXPECT_THAT(SummaryToText(summary),
              HasSubstr("quantization     compressed-tensors pack-quantized: W4A16 (int4 "
                        "symmetric group 32) on Linear; ignoring lm_head, re:.*in_proj_a$, "
                        "re:.*in_proj_b$\n"));
}

TEST(CheckpointSummaryTest, SummarisesTheDrafter) {
  const CheckpointSummary summary = SummarizeFixture("dflash-tiny-a");
  EXPECT_TRUE(std::holds_alternative<DFlashDraftConfig>(summary.model));
  EXPECT_EQ(summary.tensor_count, 25);

  const nlohmann::json json = SummaryToJson(summary);
  EXPECT_EQ(json["architecture"], "DFlashDraftModel");
  EXPECT_EQ(json["drafter"]["block_size"], 8);
  EXPECT_EQ(json["drafter"]["target_layer_ids"], nlohmann::json({0, 2}));
  EXPECT_THAT(SummaryToText(summary),
              HasSubstr("drafter          DFlash, block size 8, taps target layers 0, 2 of 4, "
                        "mask token 319\n"));
}

TEST(CheckpointSummaryTest, ReportsADirectoryWithoutAConfig) {
  EXPECT_THAT(SummarizeCheckpoint("/nonexistent").status().message(),
              HasSubstr("/nonexistent/config.json"));
}

}  // namespace
}  // namespace specd::io
