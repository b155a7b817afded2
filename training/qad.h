#pragma once
// Quantization-aware distillation of the INT4 target (research/dflash.md §6.3–6.4, after
// nota-github/adaptfm-quant-dflash): the W4A16 student trains its latent weights through fake
// quantization on the frozen grid of its checkpoint (RTN or AWQ; scales never move) to match a
// frozen dense teacher. The loss of a packed sequence is the per-token forward
// KL(p_teacher ‖ p_student) over the full vocabulary at temperature 1, in float32, averaged over
// every token that is not padding (prompt and response alike). The recipe's defaults: 8-bit
// AdamW at lr 2e-6, betas (0.9, 0.95), no weight decay, clip 1.0, cosine with 3% warmup, 8000
// steps of 16 sequences, validation every 200 steps, a state every 1000. The best model ships
// packed back onto its grid as a compressed-tensors W4A16 checkpoint (parameter_io.h).
#include <cstdint>
#include <filesystem>

#include "absl/status/statusor.h"
#include "common/model/qwen35_model.h"
#include "training/packed_dataset.h"
#include "training/training_loop.h"

namespace specd::train {

struct QadOptions {
  std::filesystem::path teacher;  // the dense (BF16/float32) model
  std::filesystem::path student;  // its W4A16 checkpoint (RTN or AWQ): the grid QAD keeps
  std::filesystem::path data;     // a packed dataset (packed_dataset.h)
  // The paper's: effective batch 16 sequences (micro-batches of one), lr 2e-6 with 3 % warmup,
  // betas (0.9, 0.95), no weight decay, clip 1.0. loop.dir is the run directory; its best/ is the
  // QAD checkpoint.
  TrainingLoopOptions loop = {
      .steps = 8000,
      .accumulation = 16,
      .lr = 2e-6,
      .warmup_ratio = 0.03,
      .clip = 1.0,
      .adamw = {.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0, .block_size = 256},
      .validate_every = 200,
      .save_every = 1000,
      .dir = {},
      .name = "qad"};
  int64_t validation_sequences = 0;  // the first ones of the validation split; 0: all
  // The order training sequences are visited in: a permutation per epoch drawn from the seed and
  // the epoch, so a micro-batch's sequence is a function of its index (resume is exact).
  uint64_t seed = 42;
};

struct DistillationMetrics {
  double kl = 0;            // mean per-token forward KL(p_teacher ‖ p_model), nats
  double perplexity = 0;    // exp(student_loss)
  double student_loss = 0;  // mean next-token cross-entropy of the model, nats
  int64_t tokens = 0;       // positions the KL averaged over
};

// The KL averaged over the non-pad tokens of the first `max_sequences` (0: all) sequences of
// `split`, and the model's perplexity on the next tokens where both a token and its successor
// are not padding (the next token of the same record). Runs without gradients.
absl::StatusOr<DistillationMetrics> MeasureDistillation(const model::Qwen35Model& teacher,
                                                        const model::Qwen35Model& model,
                                                        const PackedDataset& data, Split split,
                                                        int64_t max_sequences);

struct QadResult {
  DistillationMetrics before;        // the student as loaded (the first validation)
  DistillationMetrics after;         // the best validation
  std::filesystem::path checkpoint;  // out/best
};

// Loads the teacher for serving and the student trainable, refuses a student without W4A16
// Linears, models whose vocabulary, width or depth differ and data whose ids do not fit them,
// then trains (resuming from out/state when it is there).
absl::StatusOr<QadResult> RunQad(const QadOptions& options);

}  // namespace specd::train
