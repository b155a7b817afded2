#pragma once
// The QAD recipe's learning rate: linear warmup over the first warmup_ratio of all steps, then
// cosine decay to min_lr at the last step; transformers' get_cosine_schedule_with_warmup
// (warmup steps = ceil(ratio · total), lr 0 at step 0) with its min-lr variant's floor.
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace specd::train {

struct CosineScheduleOptions {
  double peak_lr = 0;
  int64_t total_steps = 0;
  double warmup_ratio = 0.03;
  double min_lr = 0;
};

class CosineSchedule {
 public:
  static absl::StatusOr<CosineSchedule> Create(const CosineScheduleOptions& options);

  // For step in [0, total_steps]; later steps stay at min_lr.
  double LearningRate(int64_t step) const;
  int64_t warmup_steps() const { return warmup_steps_; }

 private:
  CosineSchedule(const CosineScheduleOptions& options, int64_t warmup_steps)
      : options_(options), warmup_steps_(warmup_steps) {}

  CosineScheduleOptions options_;
  int64_t warmup_steps_;
};

// torch.nn.utils.clip_grad_norm_: scales every defined gradient by max_norm / (norm + 1e-6)
// when the global L2 norm over all of them exceeds max_norm; returns the norm before clipping.
double ClipGradNorm(const std::vector<at::Tensor>& params, double max_norm);

}  // namespace specd::train
