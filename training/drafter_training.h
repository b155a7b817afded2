#pragma once
// Training of a DFlash block-diffusion drafter against a frozen Qwen3.5 target, SpecForge's
// recipe as Nota runs it (research/dflash.md §4, §6.5): per packed sequence the target's tapped
// hidden states are the context; anchors sampled on assistant tokens each start a block
// [anchor, MASK × (B − 1)] (embedded with the target's table) that the drafter denoises in one
// forward; the target's head turns the draft into logits, and slot k ≥ 1 is trained on the
// data's token at anchor + k with the weight exp(−(k − 1)/γ). Stage 1 starts from a random
// drafter on the BF16 target, stage 2 from stage 1's weights on the QAD W4A16 target; each stage
// restarts the optimizer and the schedule.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/dflash_drafter.h"
#include "common/model/qwen35_model.h"
#include "training/packed_dataset.h"
#include "training/training_loop.h"

namespace specd::train {

struct DrafterTrainingOptions {
  std::filesystem::path target;  // frozen target (stage 1: the dense teacher; stage 2: the QAD
                                 // W4A16 target)
  std::filesystem::path data;    // packed dataset (the target's regenerated answers)
  std::filesystem::path init;    // drafter to start from (random, or stage 1's best): weights only
  int64_t anchors = 512;         // blocks per sequence, at most
  double gamma = 7.0;            // loss decay over block slots; <= 0: no decay
  // The paper's AdamW: lr 1e-3 with 4 % warmup, no weight decay, clip 1.0. loop.dir is the run
  // directory; its best/ is the drafter.
  TrainingLoopOptions loop = {
      .steps = 0,
      .accumulation = 1,
      .lr = 1e-3,
      .warmup_ratio = 0.04,
      .clip = 1.0,
      .adamw = {.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0, .block_size = 256},
      .validate_every = 0,
      .save_every = 0,
      .dir = {},
      .name = "drafter"};
  int64_t validation_sequences = 0;  // <= 0: the whole validation split
  uint64_t seed = 0;                 // the data order and the anchors
};

struct DrafterMetrics {
  double loss = 0;  // Σ w·CE / Σ w over every block evaluated
  // Argmax match on the positions the loss counts (k ≥ 1, assistant token), unweighted.
  double accuracy = 0;
  // Mean over blocks of 1 + the number of leading slots k = 1… predicted right: the acceptance
  // length τ a block would get if the target agreed with the data. The run also stops at a slot
  // off the assistant's text (past its answer), whose token the target would not produce.
  double expected_acceptance = 0;
  std::vector<double> position_accuracy;  // per slot k = 1..B − 1 (NaN where none was counted)
};

// The loss weight of block slot k (research/dflash.md §4.1): 0 for the anchor (k = 0), then
// exp(−(k − 1)/γ); 1 for every k ≥ 1 when γ <= 0.
double DFlashSlotWeight(int64_t k, double gamma);

// The positions an anchor may take in a sequence of length S with loss mask `mask` (bool [S]):
// p in [1, S − B] with mask[p], so the block's positions p..p + B − 1 stay in the sequence and
// its context (positions < p) is not empty. Increasing.
std::vector<int64_t> AnchorCandidates(const at::Tensor& mask, int64_t block_size);

// The context features [S, taps · hidden] of `ids` (int64 [S]): the target's hidden states at
// the drafter's taps, concatenated, computed without gradient (the target is frozen).
absl::StatusOr<at::Tensor> TargetContextFeatures(const model::Qwen35Model& target,
                                                 const model::DFlashDrafter& drafter,
                                                 const at::Tensor& ids);

// min(count, candidates) anchors drawn without replacement from AnchorCandidates by a stream
// seeded by (seed, stream), sorted: the same arguments always give the same anchors.
std::vector<int64_t> SampleAnchors(const at::Tensor& mask, int64_t block_size, int64_t count,
                                   uint64_t seed, uint64_t stream);

// The drafter's metrics on the first `max_sequences` (<= 0: all) sequences of `split`, with up to
// `anchors` blocks per sequence sampled by (seed, sequence index) and the loss weighted with
// `gamma`. Sequences without a candidate anchor are left out; none at all is an error.
absl::StatusOr<DrafterMetrics> EvaluateDrafter(const model::Qwen35Model& target,
                                               const model::DFlashDrafter& drafter,
                                               const PackedDataset& data, Split split,
                                               int64_t max_sequences, uint64_t seed,
                                               int64_t anchors = 512, double gamma = 7.0);

// Trains options.init on options.data against options.target into options.out (resuming from
// out/state if there is one). Micro-batch i is one training sequence, taken in an order shuffled
// per epoch by (seed, epoch), with anchors sampled by (seed, i); a sequence without a candidate
// anchor contributes a zero loss (tokens 0). Validation evaluates the validation split (the
// training split when it is empty). Returns the metrics of out/best on that split.
absl::StatusOr<DrafterMetrics> TrainDrafter(const DrafterTrainingOptions& options);

// What both drafter stages start from: the frozen target, the drafter (trainable or not) and the
// data, loaded and checked to fit one another (the drafter made for this target, the data's ids
// in its vocabulary).
struct DrafterWorkspace {
  model::Qwen35Model target;
  model::DFlashDrafter drafter;
  PackedDataset data;
};
absl::StatusOr<DrafterWorkspace> LoadDrafterWorkspace(const std::filesystem::path& target,
                                                      const std::filesystem::path& drafter,
                                                      const std::filesystem::path& data,
                                                      bool trainable);

}  // namespace specd::train
