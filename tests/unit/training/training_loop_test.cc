// The shared training loop trains, logs, keeps the best model and resumes exactly.
#include "training/training_loop.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/model/qwen35_model.h"
#include "tests/support/paths.h"
#include "tests/support/temp_dir.h"

namespace specd::train {
namespace {

std::filesystem::path FixtureDir() {
  return specd::testing::SharedDir() / "fixtures" / "qwen35-tiny-a";
}

model::Qwen35Model TrainableFixture() {
  absl::StatusOr<model::Qwen35Model> model =
      model::Qwen35Model::Load(FixtureDir(), {.trainable = true});
  EXPECT_TRUE(model.ok()) << model.status();
  return *std::move(model);
}

// Next-token cross-entropy of a fixed sequence, rotated by the micro-batch index.
absl::StatusOr<MicroBatchLoss> SequenceLoss(const model::Qwen35Model& model, int64_t index) {
  std::vector<int64_t> ids = {5, 17, 3, 99, 42, 8, 23, 64, 1, 77};
  std::rotate(ids.begin(), ids.begin() + index % 3, ids.end());
  absl::StatusOr<model::Qwen35Cache> cache = model.NewCache(static_cast<int64_t>(ids.size()));
  if (!cache.ok()) return cache.status();
  absl::StatusOr<model::ForwardOutput> output =
      model.Prefill(ids, *cache, {.logit_rows = model::LogitRows::kAll, .hidden_states = {}});
  if (!output.ok()) return output.status();
  const at::Tensor targets = at::tensor(std::vector<int64_t>(ids.begin() + 1, ids.end()));
  const at::Tensor logits = output->logits.narrow(0, 0, targets.size(0));
  return MicroBatchLoss{.loss = at::cross_entropy_loss(logits, targets), .tokens = targets.size(0)};
}

TrainingHooks HooksFor(const model::Qwen35Model& model) {
  return {.loss = [&model](int64_t index) { return SequenceLoss(model, index); },
          .validate = [&model]() -> absl::StatusOr<Metrics> {
            at::NoGradGuard no_grad;
            absl::StatusOr<MicroBatchLoss> loss = SequenceLoss(model, 0);
            if (!loss.ok()) return loss.status();
            return Metrics{{"loss", loss->loss.item<double>()}};
          },
          .export_model =
              [](const std::filesystem::path& dir) {
                std::filesystem::create_directories(dir);
                std::ofstream(dir / "exported") << "yes";
                return absl::OkStatus();
              }};
}

TrainingLoopOptions Options(const std::filesystem::path& dir, int64_t steps) {
  return {.steps = steps,
          .accumulation = 2,
          .lr = 3e-3,
          .warmup_ratio = 0.1,
          .clip = 1.0,
          .adamw = {.weight_decay = 0},
          .validate_every = 2,
          .save_every = 2,
          .dir = dir,
          .name = "test"};
}

int64_t Lines(const std::filesystem::path& path) {
  std::ifstream in(path);
  int64_t lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}

TEST(TrainingLoopTest, LowersTheLossLogsEveryStepAndKeepsTheBestModel) {
  specd::testing::TempDir dir;
  const model::Qwen35Model model = TrainableFixture();
  absl::StatusOr<TrainingSummary> summary =
      RunTraining(model.parameters(), Options(dir.path(), 6), HooksFor(model));
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->steps, 6);
  EXPECT_LT(summary->best_validation.at("loss"), summary->first_validation.at("loss"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "best" / "exported"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "state" / "progress.json"));
  EXPECT_EQ(Lines(dir.path() / "metrics.jsonl"), 6 + 4);  // steps, validations at 0, 2, 4, 6
}

TEST(TrainingLoopTest, AResumedRunEndsWhereAnUninterruptedOneEnds) {
  specd::testing::TempDir straight_dir, resumed_dir;
  const model::Qwen35Model straight = TrainableFixture();
  ASSERT_TRUE(
      RunTraining(straight.parameters(), Options(straight_dir.path(), 4), HooksFor(straight)).ok());
  {
    // The first run stops after step 2 (its state is saved there) ...
    const model::Qwen35Model first = TrainableFixture();
    TrainingLoopOptions options = Options(resumed_dir.path(), 4);
    TrainingHooks hooks = HooksFor(first);
    hooks.loss = [&first](int64_t index) -> absl::StatusOr<MicroBatchLoss> {
      if (index >= 4) return absl::CancelledError("interrupted");
      return SequenceLoss(first, index);
    };
    EXPECT_EQ(RunTraining(first.parameters(), options, hooks).status().code(),
              absl::StatusCode::kCancelled);
  }
  // ... and a fresh process continues from it.
  const model::Qwen35Model resumed = TrainableFixture();
  ASSERT_TRUE(
      RunTraining(resumed.parameters(), Options(resumed_dir.path(), 4), HooksFor(resumed)).ok());
  for (size_t i = 0; i < straight.parameters().size(); ++i) {
    EXPECT_TRUE(
        at::allclose(straight.parameters()[i].tensor, resumed.parameters()[i].tensor, 1e-5, 1e-6))
        << straight.parameters()[i].name;
  }
  EXPECT_EQ(Lines(resumed_dir.path() / "metrics.jsonl"),
            Lines(straight_dir.path() / "metrics.jsonl"));
}

TEST(TrainingLoopTest, ANonFiniteLossStopsTheRunWithAnError) {
  specd::testing::TempDir dir;
  const model::Qwen35Model model = TrainableFixture();
  TrainingHooks hooks = HooksFor(model);
  hooks.loss = [](int64_t) -> absl::StatusOr<MicroBatchLoss> {
    return MicroBatchLoss{.loss = at::full({}, std::nan(""), at::requires_grad()), .tokens = 1};
  };
  EXPECT_EQ(RunTraining(model.parameters(), Options(dir.path(), 2), hooks).status().code(),
            absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace specd::train
