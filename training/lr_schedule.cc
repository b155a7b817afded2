#include "training/lr_schedule.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "absl/strings/str_cat.h"

namespace specd::train {

absl::StatusOr<CosineSchedule> CosineSchedule::Create(const CosineScheduleOptions& options) {
  if (options.total_steps <= 0 || options.warmup_ratio < 0 || options.warmup_ratio > 1 ||
      options.min_lr > options.peak_lr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cosine schedule: total_steps ", options.total_steps, ", warmup_ratio ",
                     options.warmup_ratio, ", lr ", options.min_lr, "..", options.peak_lr));
  }
  const auto warmup = static_cast<int64_t>(
      std::ceil(options.warmup_ratio * static_cast<double>(options.total_steps)));
  return CosineSchedule(options, warmup);
}

double CosineSchedule::LearningRate(int64_t step) const {
  if (step < warmup_steps_) {
    return options_.peak_lr * static_cast<double>(step) / static_cast<double>(warmup_steps_);
  }
  const int64_t decay_steps = std::max<int64_t>(1, options_.total_steps - warmup_steps_);
  const double progress =
      std::min(1.0, static_cast<double>(step - warmup_steps_) / static_cast<double>(decay_steps));
  return options_.min_lr +
         (options_.peak_lr - options_.min_lr) * 0.5 * (1 + std::cos(std::numbers::pi * progress));
}

double ClipGradNorm(const std::vector<at::Tensor>& params, double max_norm) {
  at::NoGradGuard no_grad;
  double squares = 0;
  for (const at::Tensor& p : params) {
    if (p.grad().defined()) squares += p.grad().to(at::kDouble).square().sum().item<double>();
  }
  const double norm = std::sqrt(squares);
  const double scale = max_norm / (norm + 1e-6);
  if (scale < 1) {
    for (const at::Tensor& p : params) {
      if (p.grad().defined()) p.grad().mul_(scale);
    }
  }
  return norm;
}

}  // namespace specd::train
