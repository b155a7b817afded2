#pragma once
// The loop every training stage shares (pretrain, QAD, drafter): gradient accumulation to an
// effective batch, global-norm clipping, 8-bit AdamW on a cosine schedule with warmup, periodic
// validation keeping the best model, a metrics file and a progress line, and resumable state.
//
// A run directory holds:
//   metrics.jsonl   one JSON object per optimizer step ({"step", "loss", "lr", "grad_norm",
//                   "tokens", "seconds"}) and per validation ({"step", "validation": {...}})
//   state/          parameters.safetensors, optimizer.bin, progress.json: the last saved step
//   best/           the servable model of the best validation loss so far (or the last step's,
//                   without validation)
//   train.log       the progress lines shown on stderr: steps, validations, resumes
// A run that finds state/ continues after its step, with the same parameters and moments; the
// stage's data order must be a function of the micro-batch index for that to be exact.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/named_parameter.h"
#include "training/adamw_8bit.h"

namespace specd::train {

struct TrainingLoopOptions {
  int64_t steps = 0;         // optimizer steps
  int64_t accumulation = 1;  // micro-batches per step (the effective batch)
  double lr = 0;             // peak learning rate
  double warmup_ratio = 0.03;
  double clip = 1.0;  // global gradient norm; 0: no clipping
  AdamW8bitOptions adamw = {};
  int64_t validate_every = 0;  // steps; the last step always validates (when a validator is set)
  int64_t save_every = 0;      // steps between resumable states; the last step always saves
  std::filesystem::path dir;   // the run directory
  std::string name = "train";  // for the progress line
};

using Metrics = std::map<std::string, double>;

struct MicroBatchLoss {
  at::Tensor loss;     // a scalar with grad: this micro-batch's mean loss
  int64_t tokens = 0;  // positions it averaged over, for throughput
};

struct TrainingHooks {
  // Micro-batch `index` = step · accumulation + i; its order must depend on the index only.
  std::function<absl::StatusOr<MicroBatchLoss>(int64_t index)> loss;
  // Metrics on held-out data, with a "loss" the loop keeps the best model by; optional.
  std::function<absl::StatusOr<Metrics>()> validate;
  // Writes the servable model into a directory.
  std::function<absl::Status(const std::filesystem::path&)> export_model;
};

struct TrainingSummary {
  int64_t steps = 0;
  double last_loss = 0;      // the last step's mean micro-batch loss
  Metrics first_validation;  // before the first step, when a validator is set
  Metrics best_validation;
  std::filesystem::path best_dir;
};

// The training sequence micro-batch `index` visits among `size`: epoch index / size goes
// through a permutation drawn from (seed, epoch), Fisher–Yates on mt19937_64 (both fully
// specified, so the order is the same on every platform), a function of the index alone as an
// exact resume needs. The current epoch's permutation is kept.
class EpochOrder {
 public:
  EpochOrder(int64_t size, uint64_t seed) : size_(size), seed_(seed) {}

  int64_t operator()(int64_t index);

 private:
  int64_t size_;
  uint64_t seed_;
  int64_t epoch_ = -1;
  std::vector<int64_t> permutation_;
};

absl::StatusOr<TrainingSummary> RunTraining(std::span<const model::NamedParameter> parameters,
                                            const TrainingLoopOptions& options,
                                            const TrainingHooks& hooks);

}  // namespace specd::train
