#include "training/drafter_training.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/torch_errors.h"
#include "training/parameter_io.h"
#include "training/training_loop.h"

namespace specd::train {

using base::CatchTorchErrors;

namespace {

// Target prefills go in pieces: attention materialises [heads, T, context] scores.
constexpr int64_t kPrefillChunk = 1024;

absl::Status Annotate(const absl::Status& status, const std::string& context) {
  return absl::Status(status.code(), absl::StrCat(context, ": ", std::string(status.message())));
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9;
  x = (x ^ (x >> 27)) * 0x94d049bb133111eb;
  return x ^ (x >> 31);
}

// A small deterministic stream (SplitMix64), the same on every platform and LibTorch version.
class Stream {
 public:
  Stream(uint64_t seed, uint64_t stream) : state_(SplitMix64(seed) ^ SplitMix64(~stream)) {}
  // Uniform enough in [0, n) for n far below 2^64.
  uint64_t Below(uint64_t n) {
    state_ += 0x9e3779b97f4a7c15;
    return SplitMix64(state_) % n;
  }

 private:
  uint64_t state_;
};

// One sequence's blocks through the drafter and the target's head, on the slots the loss counts.
struct DraftedSlots {
  at::Tensor logits;   // [R, vocab] float32, differentiable in the drafter's weights
  at::Tensor labels;   // [R] int64: the data's tokens
  at::Tensor weights;  // [R] float32, all > 0
  at::Tensor block;    // [R] int64: the block (index into the anchors) of each row
  at::Tensor slot;     // [R] int64: k in [1, B)
};

absl::StatusOr<DraftedSlots> DraftSlots(const model::Qwen35Model& target,
                                        const model::DFlashDrafter& drafter,
                                        const Sequence& sequence,
                                        const std::vector<int64_t>& anchors, double gamma) {
  absl::StatusOr<at::Tensor> context = TargetContextFeatures(target, drafter, sequence.ids);
  if (!context.ok()) return context.status();
  return CatchTorchErrors("drafting the anchored blocks", [&]() -> absl::StatusOr<DraftedSlots> {
    const int64_t block_size = drafter.config().block_size;
    const auto blocks = static_cast<int64_t>(anchors.size());
    const at::Tensor anchor_tensor = at::tensor(anchors, at::kLong);
    const at::Tensor positions =
        (anchor_tensor.unsqueeze(1) + at::arange(block_size, at::kLong).unsqueeze(0)).flatten();
    const at::Tensor ids = sequence.ids.to(at::kLong);
    const at::Tensor data_tokens = ids.index_select(0, positions);  // [N·B]
    at::Tensor block_ids =
        at::full({blocks, block_size}, drafter.config().mask_token_id, at::kLong);
    block_ids.select(1, 0).copy_(ids.index_select(0, anchor_tensor));
    std::vector<float> slot_weights(block_size);
    for (int64_t k = 0; k < block_size; ++k) {
      slot_weights[k] = static_cast<float>(DFlashSlotWeight(k, gamma));
    }
    const at::Tensor weights =
        (sequence.mask.index_select(0, positions).to(at::kFloat).view({blocks, block_size}) *
         at::tensor(slot_weights).unsqueeze(0))
            .flatten();
    const at::Tensor rows = at::nonzero(weights > 0).squeeze(1);

    at::Tensor embeddings;
    {
      at::NoGradGuard no_grad;
      embeddings = target.Embed(block_ids.flatten().to(target.options().device));
    }
    absl::StatusOr<at::Tensor> hidden =
        drafter.DraftAnchoredBlocks(*context, embeddings, anchor_tensor);
    if (!hidden.ok()) return hidden.status();
    const at::Tensor counted = hidden->index_select(0, rows.to(hidden->device()));
    DraftedSlots slots{.logits = target.Head(counted.to(target.options().device)),
                       .labels = data_tokens.index_select(0, rows),
                       .weights = weights.index_select(0, rows),
                       .block = rows.div(block_size, "floor"),
                       .slot = at::remainder(rows, block_size)};
    const at::Device device = slots.logits.device();
    slots.labels = slots.labels.to(device);
    slots.weights = slots.weights.to(device);
    return slots;
  });
}

// Σ w·CE / (Σ w + 1e-6) (research/dflash.md §4.1); differentiable.
at::Tensor WeightedLoss(const DraftedSlots& slots) {
  const at::Tensor ce = at::cross_entropy_loss(slots.logits, slots.labels, {}, at::Reduction::None);
  return (ce * slots.weights).sum() / (slots.weights.sum() + 1e-6);
}

// A loss of 0 with a gradient (of zeros) for every parameter.
at::Tensor ZeroLoss(std::span<const model::NamedParameter> parameters) {
  at::Tensor loss = at::zeros({}, at::kFloat);
  for (const model::NamedParameter& parameter : parameters) {
    loss = loss + parameter.tensor.sum().to(at::kFloat).cpu() * 0.0;
  }
  return loss;
}

Metrics ToLoopMetrics(const DrafterMetrics& metrics) {
  return {{"loss", metrics.loss},
          {"accuracy", metrics.accuracy},
          {"expected_acceptance", metrics.expected_acceptance}};
}

}  // namespace

double DFlashSlotWeight(int64_t k, double gamma) {
  if (k <= 0) return 0;
  if (gamma <= 0) return 1;
  return std::exp(-static_cast<double>(k - 1) / gamma);
}

std::vector<int64_t> AnchorCandidates(const at::Tensor& mask, int64_t block_size) {
  const at::Tensor flags = mask.to(at::kBool).contiguous().cpu();
  const bool* data = flags.data_ptr<bool>();
  std::vector<int64_t> candidates;
  for (int64_t p = 1; p <= flags.numel() - block_size; ++p) {
    if (data[p]) candidates.push_back(p);
  }
  return candidates;
}

std::vector<int64_t> SampleAnchors(const at::Tensor& mask, int64_t block_size, int64_t count,
                                   uint64_t seed, uint64_t stream) {
  std::vector<int64_t> candidates = AnchorCandidates(mask, block_size);
  const auto chosen =
      static_cast<size_t>(std::clamp<int64_t>(count, 0, static_cast<int64_t>(candidates.size())));
  // A partial Fisher–Yates shuffle: the first `chosen` are a uniform sample.
  Stream random(seed, stream);
  for (size_t i = 0; i < chosen; ++i) {
    std::swap(candidates[i], candidates[i + random.Below(candidates.size() - i)]);
  }
  candidates.resize(chosen);
  std::sort(candidates.begin(), candidates.end());
  return candidates;
}

absl::StatusOr<at::Tensor> TargetContextFeatures(const model::Qwen35Model& target,
                                                 const model::DFlashDrafter& drafter,
                                                 const at::Tensor& ids) {
  at::NoGradGuard no_grad;
  const at::Tensor tokens = ids.to(at::kLong).contiguous().cpu();
  const std::span<const int64_t> all(tokens.data_ptr<int64_t>(),
                                     static_cast<size_t>(tokens.numel()));
  absl::StatusOr<model::Qwen35Cache> cache = target.NewCache(static_cast<int64_t>(all.size()));
  if (!cache.ok()) return Annotate(cache.status(), "the target's cache");
  const model::ForwardOptions forward{.logit_rows = model::LogitRows::kLast,
                                      .hidden_states = drafter.TargetHiddenStates()};
  std::vector<at::Tensor> pieces;
  for (size_t start = 0; start < all.size(); start += kPrefillChunk) {
    const std::span<const int64_t> piece =
        all.subspan(start, std::min<size_t>(kPrefillChunk, all.size() - start));
    absl::StatusOr<model::ForwardOutput> output =
        start == 0 ? target.Prefill(piece, *cache, forward) : target.Extend(piece, *cache, forward);
    if (!output.ok()) return Annotate(output.status(), "the target's forward");
    absl::StatusOr<at::Tensor> features = CatchTorchErrors(
        "the context features",
        [&]() -> absl::StatusOr<at::Tensor> { return at::cat(output->hidden_states, 1); });
    if (!features.ok()) return features.status();
    pieces.push_back(*std::move(features));
  }
  return CatchTorchErrors("the context features",
                          [&]() -> absl::StatusOr<at::Tensor> { return at::cat(pieces, 0); });
}

absl::StatusOr<DrafterMetrics> EvaluateDrafter(const model::Qwen35Model& target,
                                               const model::DFlashDrafter& drafter,
                                               const PackedDataset& data, Split split,
                                               int64_t max_sequences, uint64_t seed,
                                               int64_t anchors, double gamma) {
  at::NoGradGuard no_grad;
  const int64_t available = data.size(split);
  const int64_t sequences = max_sequences <= 0 ? available : std::min(max_sequences, available);
  const int64_t block_size = drafter.config().block_size;
  double loss_sum = 0, weight_sum = 0, acceptance_sum = 0;
  int64_t correct = 0, counted = 0, blocks = 0;
  std::vector<int64_t> slot_correct(block_size, 0), slot_counted(block_size, 0);
  for (int64_t i = 0; i < sequences; ++i) {
    const Sequence sequence = data.Get(split, i);
    const std::vector<int64_t> chosen =
        SampleAnchors(sequence.mask, block_size, anchors, seed, static_cast<uint64_t>(i));
    if (chosen.empty()) continue;
    absl::StatusOr<DraftedSlots> slots = DraftSlots(target, drafter, sequence, chosen, gamma);
    if (!slots.ok()) {
      return Annotate(slots.status(), absl::StrCat(SplitName(split), " sequence ", i));
    }
    absl::Status measured = CatchTorchErrors("drafter metrics", [&]() -> absl::Status {
      const at::Tensor ce =
          at::cross_entropy_loss(slots->logits, slots->labels, {}, at::Reduction::None);
      loss_sum += (ce * slots->weights).sum().item<double>();
      weight_sum += slots->weights.sum().item<double>();
      const at::Tensor right = (slots->logits.argmax(1) == slots->labels).cpu();
      correct += right.sum().item<int64_t>();
      counted += right.numel();
      const auto n = static_cast<int64_t>(chosen.size());
      // [N, B]: slot k of block j was counted and predicted right; a run of them from k = 1 is
      // what the target would accept.
      const at::Tensor right_count = right.to(at::kLong);
      const at::Tensor hit =
          at::zeros({n * block_size}, at::kLong)
              .index_add_(0, slots->block * block_size + slots->slot, right_count)
              .view({n, block_size});
      acceptance_sum +=
          static_cast<double>(n) + hit.narrow(1, 1, block_size - 1).cumprod(1).sum().item<double>();
      blocks += n;
      const at::Tensor slot_right =
          at::zeros({block_size}, at::kLong).index_add_(0, slots->slot, right_count);
      const at::Tensor slot_seen =
          at::zeros({block_size}, at::kLong).index_add_(0, slots->slot, at::ones_like(right_count));
      for (int64_t k = 0; k < block_size; ++k) {
        slot_correct[k] += slot_right[k].item<int64_t>();
        slot_counted[k] += slot_seen[k].item<int64_t>();
      }
      return absl::OkStatus();
    });
    if (!measured.ok()) return measured;
  }
  if (blocks == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("no ", SplitName(split), " sequence of the ", sequences,
                     " evaluated has an assistant token with room for a block of ", block_size));
  }
  DrafterMetrics metrics{
      .loss = loss_sum / (weight_sum + 1e-6),
      .accuracy = counted > 0 ? static_cast<double>(correct) / static_cast<double>(counted) : 0,
      .expected_acceptance = acceptance_sum / static_cast<double>(blocks),
      .position_accuracy = {}};
  for (int64_t k = 1; k < block_size; ++k) {
    metrics.position_accuracy.push_back(slot_counted[k] > 0
                                            ? static_cast<double>(slot_correct[k]) /
                                                  static_cast<double>(slot_counted[k])
                                            : std::numeric_limits<double>::quiet_NaN());
  }
  return metrics;
}

absl::StatusOr<DrafterWorkspace> LoadDrafterWorkspace(const std::filesystem::path& target_dir,
                                                      const std::filesystem::path& drafter_dir,
                                                      const std::filesystem::path& data_dir,
                                                      bool trainable) {
  absl::StatusOr<model::Qwen35Model> target = model::Qwen35Model::Load(target_dir);
  if (!target.ok()) return Annotate(target.status(), absl::StrCat("target ", target_dir.string()));
  absl::StatusOr<model::DFlashDrafter> drafter = model::DFlashDrafter::Load(
      drafter_dir, {.device = c10::kCPU, .dtype = c10::kFloat, .trainable = trainable});
  if (!drafter.ok()) {
    return Annotate(drafter.status(), absl::StrCat("drafter ", drafter_dir.string()));
  }
  if (absl::Status fits = drafter->CheckTarget(target->config()); !fits.ok()) {
    return Annotate(
        fits, absl::StrCat("drafter ", drafter_dir.string(), " for target ", target_dir.string()));
  }
  absl::StatusOr<PackedDataset> data = PackedDataset::Open(data_dir);
  if (!data.ok()) return Annotate(data.status(), absl::StrCat("data ", data_dir.string()));
  if (data->vocab_size() > target->config().vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("data ", data_dir.string(), " has a vocabulary of ", data->vocab_size(),
                     ", more than the target's ", target->config().vocab_size));
  }
  return DrafterWorkspace{
      .target = *std::move(target), .drafter = *std::move(drafter), .data = *std::move(data)};
}

absl::StatusOr<DrafterMetrics> TrainDrafter(const DrafterTrainingOptions& options) {
  if (options.loop.steps <= 0 || options.anchors <= 0 || options.loop.accumulation <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "drafter training needs steps, anchors and accumulation > 0, got ", options.loop.steps,
        ", ", options.anchors, " and ", options.loop.accumulation));
  }
  absl::StatusOr<DrafterWorkspace> workspace =
      LoadDrafterWorkspace(options.target, options.init, options.data, /*trainable=*/true);
  if (!workspace.ok()) return workspace.status();
  const model::Qwen35Model& target = workspace->target;
  const model::DFlashDrafter& drafter = workspace->drafter;
  const PackedDataset& data = workspace->data;
  if (data.size(Split::kTrain) == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("data ", options.data.string(), " has no training sequence"));
  }
  const Split held_out = data.size(Split::kValidation) > 0 ? Split::kValidation : Split::kTrain;
  const auto evaluate = [&](const model::DFlashDrafter& model) {
    return EvaluateDrafter(target, model, data, held_out, options.validation_sequences,
                           options.seed, options.anchors, options.gamma);
  };

  EpochOrder order(data.size(Split::kTrain), options.seed);
  const TrainingHooks hooks{
      .loss = [&](int64_t index) -> absl::StatusOr<MicroBatchLoss> {
        const Sequence sequence = data.Get(Split::kTrain, order(index));
        const std::vector<int64_t> anchors =
            SampleAnchors(sequence.mask, drafter.config().block_size, options.anchors, options.seed,
                          static_cast<uint64_t>(index));
        if (anchors.empty())
          return MicroBatchLoss{.loss = ZeroLoss(drafter.parameters()), .tokens = 0};
        absl::StatusOr<DraftedSlots> slots =
            DraftSlots(target, drafter, sequence, anchors, options.gamma);
        if (!slots.ok()) return Annotate(slots.status(), absl::StrCat("micro-batch ", index));
        return CatchTorchErrors("the drafter loss", [&]() -> absl::StatusOr<MicroBatchLoss> {
          return MicroBatchLoss{.loss = WeightedLoss(*slots), .tokens = slots->labels.size(0)};
        });
      },
      .validate = [&]() -> absl::StatusOr<Metrics> {
        absl::StatusOr<DrafterMetrics> metrics = evaluate(drafter);
        if (!metrics.ok()) return metrics.status();
        return ToLoopMetrics(*metrics);
      },
      .export_model =
          [&](const std::filesystem::path& dir) {
            return ExportCheckpoint(drafter.parameters(), options.init, dir);
          },
  };
  absl::StatusOr<TrainingSummary> summary = RunTraining(drafter.parameters(), options.loop, hooks);
  if (!summary.ok()) return summary.status();
  absl::StatusOr<model::DFlashDrafter> best = model::DFlashDrafter::Load(summary->best_dir);
  if (!best.ok()) {
    return Annotate(best.status(), absl::StrCat("trained drafter ", summary->best_dir.string()));
  }
  return evaluate(*best);
}

}  // namespace specd::train
