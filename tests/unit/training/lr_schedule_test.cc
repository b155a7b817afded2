#include "training/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

namespace specd::train {
namespace {

CosineSchedule Schedule(double min_lr) {
  auto schedule = CosineSchedule::Create(
      {.peak_lr = 1e-3, .total_steps = 1000, .warmup_ratio = 0.03, .min_lr = min_lr});
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  return *schedule;
}

TEST(CosineScheduleTest, WarmsUpLinearlyFromZeroToThePeakOverTheWarmupRatioOfSteps) {
  const CosineSchedule schedule = Schedule(0);
  EXPECT_EQ(schedule.warmup_steps(), 30);
  EXPECT_DOUBLE_EQ(schedule.LearningRate(0), 0);
  EXPECT_DOUBLE_EQ(schedule.LearningRate(1), 1e-3 / 30);
  EXPECT_DOUBLE_EQ(schedule.LearningRate(15), 0.5e-3);
  EXPECT_DOUBLE_EQ(schedule.LearningRate(30), 1e-3);
}

TEST(CosineScheduleTest, DecaysAlongACosineToTheMinimumAtTheLastStep) {
  for (const double min_lr : {0.0, 1e-4}) {
    const CosineSchedule schedule = Schedule(min_lr);
    EXPECT_NEAR(schedule.LearningRate(515), (1e-3 + min_lr) / 2, 1e-15);  // halfway through decay
    EXPECT_NEAR(schedule.LearningRate(1000), min_lr, 1e-15);
    EXPECT_NEAR(schedule.LearningRate(2000), min_lr, 1e-15);
    for (int64_t step = 30; step < 1000; ++step) {
      EXPECT_LE(schedule.LearningRate(step + 1), schedule.LearningRate(step)) << step;
    }
  }
}

TEST(CosineScheduleTest, RejectsNoStepsAndRatiosOutsideZeroToOne) {
  EXPECT_FALSE(
      CosineSchedule::Create({.peak_lr = 1, .total_steps = 0, .warmup_ratio = 0, .min_lr = 0})
          .ok());
  EXPECT_FALSE(
      CosineSchedule::Create({.peak_lr = 1, .total_steps = 9, .warmup_ratio = 1.5, .min_lr = 0})
          .ok());
}

std::vector<at::Tensor> ParamsWithGrads(std::vector<std::vector<float>> grads) {
  std::vector<at::Tensor> params;
  for (const auto& grad : grads) {
    at::Tensor p = at::zeros({static_cast<int64_t>(grad.size())});
    p.mutable_grad() = at::tensor(grad);
    params.push_back(p);
  }
  return params;
}

TEST(ClipGradNormTest, ReturnsTheGlobalNormAndScalesGradientsDownToMaxNorm) {
  const std::vector<at::Tensor> params = ParamsWithGrads({{3, 4}, {12}});  // sqrt(9+16+144) = 13
  EXPECT_DOUBLE_EQ(ClipGradNorm(params, 6.5), 13);
  const double scale = 6.5 / (13 + 1e-6);  // torch's clip_coef
  EXPECT_FLOAT_EQ(params[0].grad()[0].item<float>(), 3 * scale);
  EXPECT_FLOAT_EQ(params[1].grad()[0].item<float>(), 12 * scale);
  EXPECT_NEAR(ClipGradNorm(params, 100), 6.5, 1e-5);
}

TEST(ClipGradNormTest, LeavesGradientsWithinMaxNormUnchanged) {
  const std::vector<at::Tensor> params = ParamsWithGrads({{3, 4}, {12}});
  EXPECT_DOUBLE_EQ(ClipGradNorm(params, 20), 13);
  EXPECT_FLOAT_EQ(params[1].grad()[0].item<float>(), 12);
}

}  // namespace
}  // namespace specd::train
