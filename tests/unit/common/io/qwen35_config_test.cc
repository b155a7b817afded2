#include "common/io/qwen35_config.h"

#include "common/io/json_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"

namespace specd::io {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr LayerType kLinear = LayerType::kLinearAttention;
constexpr LayerType kFull = LayerType::kFullAttention;

// The Qwen3.5-4B text config, without layer_types, in the transformers 5 spelling.
json TextConfig4B() {
  return json::parse(R"({
    "model_type": "qwen3_5_text", "vocab_size": 248320, "hidden_size": 2560,
    "intermediate_size": 9216, "num_hidden_layers": 8, "num_attention_heads": 16,
    "num_key_value_heads": 4, "head_dim": 256, "linear_num_key_heads": 16,
    "linear_num_value_heads": 32, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4, "max_position_embeddings": 262144, "rms_norm_eps": 1e-6,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000,
                        "partial_rotary_factor": 0.25},
    "eos_token_id": 248044, "dtype": "bfloat16"})");
}

absl::Status ParseStatus(const json& config) {
  return ParseQwen35TextConfig(config, "config.json").status();
}

TEST(Qwen35ConfigTest, ReadsTheTinyTargetFixture) {
  const std::filesystem::path path =
      specd::testing::SharedDir() / "fixtures" / "qwen35-tiny-a" / "config.json";
  absl::StatusOr<json> file = ReadJsonFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<Qwen35TextConfig> config = ParseQwen35TextConfig(*file, path.string());
  ASSERT_TRUE(config.ok()) << config.status();

  EXPECT_EQ(config->architecture, "Qwen3_5ForCausalLM");
  EXPECT_EQ(config->model_type, "qwen3_5_text");
  EXPECT_EQ(config->tensor_prefix, "model.");
  EXPECT_EQ(config->vocab_size, 320);
  EXPECT_EQ(config->hidden_size, 64);
  EXPECT_EQ(config->intermediate_size, 128);
  EXPECT_EQ(config->num_hidden_layers, 4);
  EXPECT_THAT(config->layer_types, ElementsAre(kLinear, kLinear, kLinear, kFull));
  EXPECT_EQ(config->num_attention_heads, 4);
  EXPECT_EQ(config->num_key_value_heads, 2);
  EXPECT_EQ(config->head_dim, 32);
  EXPECT_EQ(config->linear_num_key_heads, 2);
  EXPECT_EQ(config->linear_num_value_heads, 4);
  EXPECT_EQ(config->linear_key_head_dim, 16);
  EXPECT_EQ(config->linear_value_head_dim, 16);
  EXPECT_EQ(config->linear_conv_kernel_dim, 4);
  EXPECT_DOUBLE_EQ(config->rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(config->rope_theta, 1e7);
  EXPECT_DOUBLE_EQ(config->partial_rotary_factor, 0.25);
  EXPECT_EQ(config->max_position_embeddings, 4096);
  EXPECT_TRUE(config->tie_word_embeddings);
  EXPECT_THAT(config->eos_token_ids, ElementsAre(1));
  EXPECT_EQ(config->torch_dtype, "float32");  // "dtype" is null, so "torch_dtype" counts
}

TEST(Qwen35ConfigTest, BuildsLayerTypesFromTheFullAttentionInterval) {
  absl::StatusOr<Qwen35TextConfig> config = ParseQwen35TextConfig(TextConfig4B(), "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->layer_types,
              ElementsAre(kLinear, kLinear, kLinear, kFull, kLinear, kLinear, kLinear, kFull));

  json every_other = TextConfig4B();
  every_other["full_attention_interval"] = 2;
  config = ParseQwen35TextConfig(every_other, "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->layer_types,
              ElementsAre(kLinear, kFull, kLinear, kFull, kLinear, kFull, kLinear, kFull));
}

TEST(Qwen35ConfigTest, ReadsTheMultimodalWrapper) {
  const json wrapper = {{"model_type", "qwen3_5"},
                        {"architectures", {"Qwen3_5ForConditionalGeneration"}},
                        {"tie_word_embeddings", true},
                        {"text_config", TextConfig4B()},
                        {"vision_config", {{"depth", 24}}}};
  absl::StatusOr<Qwen35TextConfig> config = ParseQwen35TextConfig(wrapper, "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model_type, "qwen3_5");
  EXPECT_EQ(config->tensor_prefix, "model.language_model.");
  EXPECT_EQ(config->hidden_size, 2560);
  EXPECT_EQ(config->num_hidden_layers, 8);
  EXPECT_TRUE(config->tie_word_embeddings);  // only the wrapper says so
  EXPECT_THAT(config->eos_token_ids, ElementsAre(248044));
  EXPECT_EQ(config->torch_dtype, "bfloat16");
}

TEST(Qwen35ConfigTest, ReadsOlderRopeFieldsAndEosLists) {
  json config = TextConfig4B();
  config.erase("rope_parameters");
  config["rope_theta"] = 5e6;
  config["partial_rotary_factor"] = 0.5;
  config["eos_token_id"] = {248044, 248046};
  absl::StatusOr<Qwen35TextConfig> parsed = ParseQwen35TextConfig(config, "config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_DOUBLE_EQ(parsed->rope_theta, 5e6);
  EXPECT_DOUBLE_EQ(parsed->partial_rotary_factor, 0.5);
  EXPECT_THAT(parsed->eos_token_ids, ElementsAre(248044, 248046));
}

TEST(Qwen35ConfigTest, NamesTheFileAndFieldOfAMissingOrMistypedValue) {
  json wrapper = {{"model_type", "qwen3_5"}, {"text_config", TextConfig4B()}};
  wrapper["text_config"].erase("hidden_size");
  EXPECT_THAT(ParseStatus(wrapper).message(),
              HasSubstr("config.json: text_config.hidden_size: missing"));

  json mistyped = TextConfig4B();
  mistyped["num_attention_heads"] = "16";
  EXPECT_THAT(ParseStatus(mistyped).message(),
              HasSubstr(R"(config.json: num_attention_heads: expected an integer, got "16")"));

  json negative = TextConfig4B();
  negative["head_dim"] = -256;
  EXPECT_THAT(ParseStatus(negative).message(),
              HasSubstr("head_dim: expected a positive integer, got -256"));

  json no_rope = TextConfig4B();
  no_rope.erase("rope_parameters");
  EXPECT_THAT(ParseStatus(no_rope).message(), HasSubstr("rope_theta: missing"));

  EXPECT_THAT(ParseStatus({{"model_type", "qwen3_5"}}).message(),
              HasSubstr("config.json: text_config: missing"));
}

TEST(Qwen35ConfigTest, RejectsOtherModelsAndInconsistentLayerTypes) {
  json llama = TextConfig4B();
  llama["model_type"] = "llama";
  EXPECT_THAT(ParseStatus(llama).message(),
              HasSubstr(R"(model_type: expected "qwen3_5_text" or "qwen3_5", got "llama")"));

  json short_list = TextConfig4B();
  short_list["layer_types"] = {"linear_attention", "full_attention"};
  EXPECT_THAT(ParseStatus(short_list).message(),
              HasSubstr("layer_types: lists 2 layers but num_hidden_layers is 8"));

  json unknown = TextConfig4B();
  unknown["layer_types"] = json::array();
  for (int i = 0; i < 8; ++i) unknown["layer_types"].push_back("sliding_attention");
  EXPECT_THAT(ParseStatus(unknown).message(),
              HasSubstr(R"(layer_types: unknown layer type "sliding_attention")"));

  EXPECT_THAT(ParseStatus(json::array()).message(),
              HasSubstr("config.json: expected a JSON object, got []"));
}

}  // namespace
}  // namespace specd::io
