#include "common/io/dflash_config.h"

#include "common/io/json_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"

namespace specd::io {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

json FixtureConfig() {
  absl::StatusOr<json> config =
      ReadJsonFile(specd::testing::SharedDir() / "fixtures" / "dflash-tiny-a" / "config.json");
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : json::object();
}

absl::Status ParseStatus(const json& config) {
  return ParseDFlashDraftConfig(config, "config.json").status();
}

TEST(DFlashConfigTest, ReadsTheTinyDrafterFixture) {
  absl::StatusOr<DFlashDraftConfig> config = ParseDFlashDraftConfig(FixtureConfig(), "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, "DFlashDraftModel");
  EXPECT_EQ(config->block_size, 8);
  EXPECT_EQ(config->mask_token_id, 319);
  EXPECT_EQ(config->num_target_layers, 4);
  EXPECT_THAT(config->target_layer_ids, ElementsAre(0, 2));
  EXPECT_EQ(config->vocab_size, 320);
  EXPECT_EQ(config->hidden_size, 64);
  EXPECT_EQ(config->intermediate_size, 96);
  EXPECT_EQ(config->num_hidden_layers, 2);
  EXPECT_EQ(config->num_attention_heads, 4);
  EXPECT_EQ(config->num_key_value_heads, 2);
  EXPECT_EQ(config->head_dim, 16);
  EXPECT_DOUBLE_EQ(config->rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(config->rope_theta, 1e7);
  EXPECT_EQ(config->max_position_embeddings, 4096);
  EXPECT_EQ(config->torch_dtype, "float32");
}

TEST(DFlashConfigTest, DerivesHeadDimLikeQwen3WhenAbsent) {
  json config = FixtureConfig();
  config.erase("head_dim");
  absl::StatusOr<DFlashDraftConfig> parsed = ParseDFlashDraftConfig(config, "config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->head_dim, 64 / 4);
}

TEST(DFlashConfigTest, ReadsTheWindowItWasTrainedForWhenSlidingWindowIsOn) {
  json config = FixtureConfig();
  EXPECT_EQ(ParseDFlashDraftConfig(config, "config.json")->sliding_window, 0);
  config["sliding_window"] = 64;
  EXPECT_EQ(ParseDFlashDraftConfig(config, "config.json")->sliding_window, 0);
  config["use_sliding_window"] = true;
  EXPECT_EQ(ParseDFlashDraftConfig(config, "config.json")->sliding_window, 64);
  config["sliding_window"] = nullptr;
  EXPECT_THAT(ParseStatus(config).message(), HasSubstr("sliding_window"));
}

TEST(DFlashConfigTest, NamesMissingAndInconsistentFields) {
  json no_mask = FixtureConfig();
  no_mask["dflash_config"].erase("mask_token_id");
  EXPECT_THAT(ParseStatus(no_mask).message(),
              HasSubstr("config.json: dflash_config.mask_token_id: missing"));

  json no_block = FixtureConfig();
  no_block.erase("block_size");
  EXPECT_THAT(ParseStatus(no_block).message(), HasSubstr("block_size: missing"));

  json deep_tap = FixtureConfig();
  deep_tap["dflash_config"]["target_layer_ids"] = {0, 4};
  EXPECT_THAT(ParseStatus(deep_tap).message(),
              HasSubstr("dflash_config.target_layer_ids: layer 4 is not one of the target's 4 "
                        "layers"));

  json big_mask = FixtureConfig();
  big_mask["dflash_config"]["mask_token_id"] = 320;
  EXPECT_THAT(ParseStatus(big_mask).message(),
              HasSubstr("dflash_config.mask_token_id: 320 is outside the vocabulary of 320"));

  json target = FixtureConfig();
  target["model_type"] = "qwen3_5_text";
  EXPECT_THAT(ParseStatus(target).message(),
              HasSubstr(R"(model_type: expected "qwen3" for a DFlash drafter)"));
}

}  // namespace
}  // namespace specd::io
