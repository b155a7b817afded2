// A trained model's two forms on disk: the exact training state, and the servable checkpoint
// (fake-quant weights packed onto their grid) that the engine loads as the same function.
#include "training/parameter_io.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include "common/model/qwen35_model.h"
#include "tests/support/paths.h"
#include "tests/support/temp_dir.h"

namespace specd::train {
namespace {

std::filesystem::path FixtureDir(const std::string& name) {
  return specd::testing::SharedDir() / "fixtures" / name;
}

model::Qwen35Model Load(const std::filesystem::path& dir, bool trainable) {
  absl::StatusOr<model::Qwen35Model> model =
      model::Qwen35Model::Load(dir, {.trainable = trainable});
  EXPECT_TRUE(model.ok()) << model.status();
  return *std::move(model);
}

at::Tensor Logits(const model::Qwen35Model& model) {
  const std::vector<int64_t> ids = {5, 17, 3, 99, 42, 8};
  absl::StatusOr<model::Qwen35Cache> cache = model.NewCache(8);
  EXPECT_TRUE(cache.ok());
  at::NoGradGuard no_grad;
  absl::StatusOr<model::ForwardOutput> output =
      model.Prefill(ids, *cache, {.logit_rows = model::LogitRows::kAll, .hidden_states = {}});
  EXPECT_TRUE(output.ok()) << output.status();
  return output->logits;
}

void Perturb(const model::Qwen35Model& model) {
  at::NoGradGuard no_grad;
  for (const model::NamedParameter& parameter : model.parameters()) {
    parameter.tensor.add_(at::randn_like(parameter.tensor), 0.01);
  }
}

TEST(ParameterIoTest, SavedParametersLoadBackExactlyLatentWeightsIncluded) {
  specd::testing::TempDir dir;
  const model::Qwen35Model trained = Load(FixtureDir("qwen35-tiny-a-w4a16"), true);
  Perturb(trained);
  ASSERT_TRUE(SaveParameters(trained.parameters(), dir.path() / "p.safetensors").ok());
  const model::Qwen35Model fresh = Load(FixtureDir("qwen35-tiny-a-w4a16"), true);
  ASSERT_TRUE(LoadParameters(fresh.parameters(), dir.path() / "p.safetensors").ok());
  for (size_t i = 0; i < trained.parameters().size(); ++i) {
    EXPECT_TRUE(at::equal(trained.parameters()[i].tensor, fresh.parameters()[i].tensor))
        << trained.parameters()[i].name;
  }
}

TEST(ParameterIoTest, AFileMissingAParameterIsAnErrorThatChangesNothing) {
  specd::testing::TempDir dir;
  const model::Qwen35Model dense = Load(FixtureDir("qwen35-tiny-a"), true);
  ASSERT_TRUE(SaveParameters({dense.parameters().data(), 1}, dir.path() / "p.safetensors").ok());
  const model::Qwen35Model other = Load(FixtureDir("qwen35-tiny-a"), true);
  const at::Tensor before = other.parameters()[1].tensor.clone();
  EXPECT_FALSE(LoadParameters(other.parameters(), dir.path() / "p.safetensors").ok());
  EXPECT_TRUE(at::equal(other.parameters()[1].tensor, before));
}

TEST(ParameterIoTest, ExportedQadModelServesWhatTheFakeQuantModelComputes) {
  specd::testing::TempDir dir;
  const model::Qwen35Model trained = Load(FixtureDir("qwen35-tiny-a-w4a16"), true);
  Perturb(trained);
  ASSERT_TRUE(
      ExportCheckpoint(trained.parameters(), FixtureDir("qwen35-tiny-a-w4a16"), dir.path()).ok());
  const model::Qwen35Model served = Load(dir.path(), false);
  EXPECT_TRUE(at::allclose(Logits(served), Logits(trained), 1e-4, 1e-4));
}

TEST(ParameterIoTest, ExportedDenseModelLoadsAsTheSameFunction) {
  specd::testing::TempDir dir;
  const model::Qwen35Model trained = Load(FixtureDir("qwen35-tiny-a"), true);
  Perturb(trained);
  ASSERT_TRUE(ExportCheckpoint(trained.parameters(), FixtureDir("qwen35-tiny-a"), dir.path()).ok());
  EXPECT_TRUE(at::allclose(Logits(Load(dir.path(), false)), Logits(trained), 1e-5, 1e-5));
}

}  // namespace
}  // namespace specd::train
