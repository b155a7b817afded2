#include "common/io/quantization_config.h"

#include "common/io/json_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"

namespace specd::io {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

// The block research/qwen35.md §5.4 shows for an AWQ (asymmetric, group 128) checkpoint.
json AsymmetricConfig() {
  return json::parse(R"({"quantization_config": {
    "quant_method": "compressed-tensors", "format": "pack-quantized",
    "quantization_status": "compressed",
    "config_groups": {"group_0": {
      "targets": ["Linear"],
      "weights": {"num_bits": 4, "type": "int", "symmetric": false, "strategy": "group",
                  "group_size": 128, "dynamic": false, "actorder": null,
                  "block_structure": null, "observer": "minmax", "observer_kwargs": {}},
      "input_activations": null, "output_activations": null}},
    "ignore": ["lm_head", "re:.*linear_attn.*", "re:model.visual.*", "re:mtp.*"],
    "kv_cache_scheme": null}})");
}

absl::Status ParseStatus(const json& config) {
  return ParseQuantizationConfig(config, "config.json").status();
}

TEST(QuantizationConfigTest, SummarisesTheW4A16Fixture) {
  const std::filesystem::path path =
      specd::testing::SharedDir() / "fixtures" / "qwen35-tiny-a-w4a16" / "config.json";
  absl::StatusOr<json> file = ReadJsonFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<std::optional<QuantizationConfig>> config =
      ParseQuantizationConfig(*file, path.string());
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->has_value());
  const QuantizationConfig& quantization = **config;

  EXPECT_EQ(quantization.quant_method, "compressed-tensors");
  EXPECT_EQ(quantization.format, "pack-quantized");
  EXPECT_THAT(quantization.ignore, ElementsAre("lm_head", "re:.*in_proj_a$", "re:.*in_proj_b$"));
  ASSERT_EQ(quantization.groups.size(), 1u);
  const QuantizationGroup& group = quantization.groups[0];
  EXPECT_EQ(group.name, "group_0");
  EXPECT_THAT(group.targets, ElementsAre("Linear"));
  EXPECT_EQ(QuantizationSchemeName(group), "W4A16");
  EXPECT_FALSE(group.input_activations.has_value());
  ASSERT_TRUE(group.weights.has_value());
  EXPECT_EQ(group.weights->num_bits, 4);
  EXPECT_EQ(group.weights->type, "int");
  EXPECT_TRUE(group.weights->symmetric);
  EXPECT_EQ(group.weights->strategy, "group");
  EXPECT_EQ(group.weights->group_size, 32);
  EXPECT_EQ(group.weights->actorder, std::nullopt);
}

TEST(QuantizationConfigTest, ReadsAsymmetricGroupsAndActivationOrdering) {
  json config = AsymmetricConfig();
  absl::StatusOr<std::optional<QuantizationConfig>> parsed =
      ParseQuantizationConfig(config, "config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const QuantizationArgs& weights = *(*parsed)->groups[0].weights;
  EXPECT_FALSE(weights.symmetric);
  EXPECT_EQ(weights.group_size, 128);

  config["quantization_config"]["config_groups"]["group_0"]["weights"]["actorder"] = "weight";
  parsed = ParseQuantizationConfig(config, "config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ((*parsed)->groups[0].weights->actorder, "weight");

  // Older configs: true meant group ordering.
  config["quantization_config"]["config_groups"]["group_0"]["weights"]["actorder"] = true;
  parsed = ParseQuantizationConfig(config, "config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ((*parsed)->groups[0].weights->actorder, "group");
}

TEST(QuantizationConfigTest, NamesActivationBitsInTheScheme) {
  json config = AsymmetricConfig();
  config["quantization_config"]["config_groups"]["group_0"]["input_activations"] = {
      {"num_bits", 8}, {"type", "int"}, {"strategy", "token"}};
  absl::StatusOr<std::optional<QuantizationConfig>> parsed =
      ParseQuantizationConfig(config, "config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(QuantizationSchemeName((*parsed)->groups[0]), "W4A8");
}

TEST(QuantizationConfigTest, AnUnquantizedConfigHasNone) {
  absl::StatusOr<std::optional<QuantizationConfig>> parsed =
      ParseQuantizationConfig(json{{"model_type", "qwen3_5_text"}}, "config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_FALSE(parsed->has_value());
}

TEST(QuantizationConfigTest, NamesMissingFieldsAndRefusesOtherMethods) {
  json no_bits = AsymmetricConfig();
  no_bits["quantization_config"]["config_groups"]["group_0"]["weights"].erase("num_bits");
  EXPECT_THAT(
      ParseStatus(no_bits).message(),
      HasSubstr(
          "config.json: quantization_config.config_groups.group_0.weights.num_bits: missing"));

  json bad_targets = AsymmetricConfig();
  bad_targets["quantization_config"]["config_groups"]["group_0"]["targets"] = "Linear";
  EXPECT_THAT(ParseStatus(bad_targets).message(),
              HasSubstr(R"(group_0.targets: expected a list of strings, got "Linear")"));

  json gptq = AsymmetricConfig();
  gptq["quantization_config"]["quant_method"] = "gptq";
  const absl::Status status = ParseStatus(gptq);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(status.message(), HasSubstr(R"("gptq" is not supported)"));
}

}  // namespace
}  // namespace specd::io
