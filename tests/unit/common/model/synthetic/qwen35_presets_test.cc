// Named shapes for random checkpoints: the real 4B shape, and smaller ones that keep its pattern.
#include "common/model/synthetic/qwen35_presets.h"

#include "gtest/gtest.h"

namespace specd::model {
namespace {

TEST(Qwen35PresetsTest, TheFourBillionPresetHasQwen35FourBsShapeAndSize) {
  absl::StatusOr<io::Qwen35TextConfig> config = Qwen35Preset("qwen35-4b");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->hidden_size, 2560);
  EXPECT_EQ(config->num_hidden_layers, 32);
  EXPECT_EQ(config->layer_types[3], io::LayerType::kFullAttention);
  EXPECT_EQ(config->layer_types[4], io::LayerType::kLinearAttention);
  EXPECT_EQ(config->vocab_size, 248320);
  EXPECT_NEAR(static_cast<double>(Qwen35ParameterCount(*config)), 4.21e9, 0.01e9);
}

TEST(Qwen35PresetsTest, ScaledDownPresetsAreAsLargeAsTheirNamesSay) {
  for (const auto& [name, parameters] : {std::pair{"qwen35-0.8b", 0.8e9}, {"qwen35-0.2b", 0.2e9}}) {
    absl::StatusOr<io::Qwen35TextConfig> config = Qwen35Preset(name);
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_NEAR(static_cast<double>(Qwen35ParameterCount(*config)), parameters, 0.1 * parameters)
        << name;
  }
}

TEST(Qwen35PresetsTest, ADecodeStepReadsOneEmbeddingRowAndTheWholeHead) {
  const io::Qwen35TextConfig config = *Qwen35Preset("qwen35-0.2b");
  EXPECT_EQ(Qwen35DecodeStepParameterCount(config),
            Qwen35ParameterCount(config) + config.hidden_size);  // tied: the head is the table
}

TEST(Qwen35PresetsTest, AnUnknownNameListsTheKnownOnes) {
  const absl::StatusOr<io::Qwen35TextConfig> config = Qwen35Preset("qwen35-70b");
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(config.status().message().find("qwen35-0.8b"), absl::string_view::npos);
}

}  // namespace
}  // namespace specd::model
