// GPTQ of a DFlash drafter calibrated through the serving path: a drafter trained briefly on a
// tiny random target is written W4A16, loads as such and predicts the answers about as well as
// the float drafter; a group size that does not fit a Linear is refused before any work.
#include "training/gptq_drafter.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/io/checkpoint.h"
#include "common/io/json_file.h"
#include "common/model/synthetic/random_checkpoint.h"
#include "common/model/synthetic/random_drafter.h"
#include "common/text/tokenizer.h"
#include "tests/unit/training/drafter_fixture.h"
#include "training/byte_tokenizer.h"
#include "training/conversations.h"
#include "training/drafter_training.h"

namespace specd::train {
namespace {

class GptqDrafterTest : public testing::DrafterFixture {
 protected:
  // Group 16 divides every input width of the drafter (48, 80 and 96).
  GptqDrafterOptions Options(const std::filesystem::path& drafter, int64_t group_size) const {
    return {.target = target(),
            .drafter = drafter,
            .data = data(),
            .out = dir_.path() / "gptq",
            .sequences = 8,
            .anchors_per_sequence = 8,
            .gptq = {.group_size = group_size,
                     .symmetric = true,
                     .damp = 0.01,
                     .act_order = false,
                     .block_size = 128,
                     .scale_dtype = io::DType::kBF16}};
  }
};

TEST_F(GptqDrafterTest, TheW4A16DrafterPredictsAboutAsWellAsTheFloatOne) {
  const absl::StatusOr<DrafterMetrics> trained =
      TrainDrafter(DrafterOptions({.out = dir_.path() / "run",
                                   .init = init(),
                                   .anchors = 64,
                                   .steps = 30,
                                   .lr = 3e-2,
                                   .warmup_ratio = 0.1,
                                   .validate_every = 0,
                                   .seed = 5}));
  ASSERT_TRUE(trained.ok()) << trained.status();
  const std::filesystem::path dense = dir_.path() / "run" / "best";
  const absl::Status quantized = RunGptqDrafter(Options(dense, 16));
  ASSERT_TRUE(quantized.ok()) << quantized;

  absl::StatusOr<nlohmann::json> config = io::ReadJsonFile(dir_.path() / "gptq" / "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->contains("quantization_config"));
  absl::StatusOr<io::Checkpoint> checkpoint = io::Checkpoint::Open(dir_.path() / "gptq");
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  for (const std::string module : {"fc", "layers.0.self_attn.q_proj", "layers.0.mlp.down_proj"}) {
    EXPECT_NE(checkpoint->Find(module + ".weight_packed"), nullptr) << module;
    EXPECT_EQ(checkpoint->Find(module + ".weight"), nullptr) << module;
  }

  absl::StatusOr<model::Qwen35Model> model = model::Qwen35Model::Load(target());
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<PackedDataset> dataset = PackedDataset::Open(data());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  absl::StatusOr<model::DFlashDrafter> float_drafter = model::DFlashDrafter::Load(dense);
  ASSERT_TRUE(float_drafter.ok()) << float_drafter.status();
  absl::StatusOr<model::DFlashDrafter> int4_drafter =
      model::DFlashDrafter::Load(dir_.path() / "gptq");
  ASSERT_TRUE(int4_drafter.ok()) << int4_drafter.status();
  const absl::StatusOr<DrafterMetrics> float_metrics =
      EvaluateDrafter(*model, *float_drafter, *dataset, Split::kValidation, 0, 5, 32, 7.0);
  ASSERT_TRUE(float_metrics.ok()) << float_metrics.status();
  const absl::StatusOr<DrafterMetrics> int4_metrics =
      EvaluateDrafter(*model, *int4_drafter, *dataset, Split::kValidation, 0, 5, 32, 7.0);
  ASSERT_TRUE(int4_metrics.ok()) << int4_metrics.status();
  std::printf(
      "float drafter: accuracy %.3f, expected acceptance %.3f; W4A16 (GPTQ g16): "
      "accuracy %.3f, expected acceptance %.3f\n",
      float_metrics->accuracy, float_metrics->expected_acceptance, int4_metrics->accuracy,
      int4_metrics->expected_acceptance);
  EXPECT_GT(float_metrics->accuracy, 0.3);  // trained: there is something to lose
  EXPECT_NEAR(int4_metrics->accuracy, float_metrics->accuracy, 0.05);
  EXPECT_NEAR(int4_metrics->expected_acceptance, float_metrics->expected_acceptance, 0.25);
}

TEST_F(GptqDrafterTest, RefusesAGroupSizeThatDoesNotDivideALinearBeforeCalibrating) {
  const absl::Status status = RunGptqDrafter(Options(init(), 32));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(std::string(status.message()).find("does not divide"), std::string::npos) << status;
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "gptq"));
}

}  // namespace
}  // namespace specd::train
