#pragma once
// Trains a small Qwen3.5-architecture model from scratch on packed text: the teacher of the
// built-in pipeline presets, since no real weights can be downloaded here. Next-token
// cross-entropy on the positions the loss mask keeps, 8-bit AdamW on a cosine schedule with
// warmup, gradient clipping, validation keeping the best model (training_loop.h).
#include <cstdint>
#include <filesystem>

#include "absl/status/statusor.h"
#include "common/io/qwen35_config.h"
#include "common/model/qwen35_model.h"
#include "training/packed_dataset.h"
#include "training/training_loop.h"

namespace specd::train {

struct PretrainOptions {
  io::Qwen35TextConfig model;       // the architecture; its vocabulary covers the data's ids
  std::filesystem::path tokenizer;  // a directory whose tokenizer files ship with the model
  std::filesystem::path data;       // a packed dataset
  // loop.dir is the run directory: its init/ holds the start, best/ the model.
  TrainingLoopOptions loop = {
      .steps = 1000,
      .accumulation = 1,
      .lr = 3e-3,
      .warmup_ratio = 0.03,
      .clip = 1.0,
      .adamw = {.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .block_size = 256},
      .validate_every = 100,
      .save_every = 100,
      .dir = {},
      .name = "pretrain"};
  int64_t validation_sequences = 0;  // 0: the whole validation split
  uint64_t seed = 0;                 // initial weights and data order
};

struct PretrainResult {
  double validation_loss = 0;  // of the best model, nats per token
  std::filesystem::path checkpoint;
};

absl::StatusOr<PretrainResult> RunPretrain(const PretrainOptions& options);

// The mean next-token cross-entropy of `model` over the loss-mask positions of the first
// `max_sequences` sequences of `split` (0: all), in nats per token.
absl::StatusOr<double> MeasureLanguageModelLoss(const model::Qwen35Model& model,
                                                const PackedDataset& data, Split split,
                                                int64_t max_sequences);

// The summed cross-entropy and the number of positions counted for one sequence, with grad
// when `model` is trainable and grad mode is on.
struct SequenceLoss {
  at::Tensor total;
  int64_t tokens = 0;
};
absl::StatusOr<SequenceLoss> NextTokenLoss(const model::Qwen35Model& model,
                                           const Sequence& sequence);

}  // namespace specd::train
