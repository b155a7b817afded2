#include "common/spec/dflash_block_drafter.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/spec/reusable_cache.h"

namespace specd::spec {

absl::StatusOr<std::unique_ptr<DFlashBlockDrafter>> DFlashBlockDrafter::Create(
    model::DFlashDrafter drafter, const model::Qwen35Model& target,
    const DFlashBlockOptions& options) {
  if (absl::Status fits = drafter.CheckTarget(target.config()); !fits.ok()) return fits;
  const int64_t trained = drafter.config().block_size;
  const int64_t block_size = options.block_size > 0 ? options.block_size : trained;
  if (block_size > trained) {
    return absl::InvalidArgumentError(
        absl::StrCat("block size ", block_size, " exceeds the drafter's block size ", trained));
  }
  if (options.window < 0 || options.min_confidence < 0 || options.min_confidence > 1) {
    return absl::InvalidArgumentError(absl::StrCat("draft window ", options.window,
                                                   " must be ≥ 0 and min confidence ",
                                                   options.min_confidence, " in [0, 1]"));
  }
  return std::unique_ptr<DFlashBlockDrafter>(
      new DFlashBlockDrafter(std::move(drafter), target, options, block_size));
}

DFlashBlockDrafter::DFlashBlockDrafter(model::DFlashDrafter drafter,
                                       const model::Qwen35Model& target,
                                       const DFlashBlockOptions& options, int64_t block_size)
    : drafter_(std::move(drafter)), target_(target), options_(options), block_size_(block_size) {}

std::vector<int64_t> DFlashBlockDrafter::TargetHiddenStates() const {
  return drafter_.TargetHiddenStates();
}

absl::Status DFlashBlockDrafter::Start(const CommittedContext& prompt, int64_t max_length) {
  absl::StatusOr<model::DFlashCache*> cache = CacheFor(drafter_, cache_, max_length);
  if (!cache.ok()) return cache.status();
  (*cache)->Reset();
  return Commit(prompt);
}

absl::Status DFlashBlockDrafter::Commit(const CommittedContext& context) {
  if (!cache_.has_value()) return absl::FailedPreconditionError("Commit before Start");
  // The taps side by side, in TargetHiddenStates() order, are the features `fc` takes.
  return drafter_.AppendContext(at::cat(context.hidden_states, /*dim=*/1), *cache_);
}

absl::StatusOr<std::vector<int64_t>> DFlashBlockDrafter::Propose(int64_t anchor,
                                                                 int64_t max_tokens) {
  if (!cache_.has_value()) return absl::FailedPreconditionError("Propose before Start");
  const int64_t count = std::min(block_size_ - 1, max_tokens);
  if (count <= 0) return std::vector<int64_t>();
  // Always the whole block the drafter was asked for: its attention is non-causal, so a shorter
  // block would change the proposals that are kept.
  std::vector<int64_t> block(block_size_, drafter_.config().mask_token_id);
  block[0] = anchor;
  absl::StatusOr<at::Tensor> hidden =
      drafter_.DraftBlock(target_.Embed(at::tensor(block, at::kLong).to(target_.options().device)),
                          *cache_, {.window = options_.window});
  if (!hidden.ok()) return hidden.status();
  const at::Tensor logits = target_.Head(hidden->narrow(0, 1, count));
  const at::Tensor tokens = logits.argmax(-1).cpu();
  int64_t kept = count;
  if (options_.min_confidence > 0) {
    const at::Tensor confident =
        (std::get<0>(at::softmax(logits, -1).max(-1)) >= options_.min_confidence).cpu();
    // The first position below the threshold and everything after it are dropped.
    kept = at::cumprod(confident.to(at::kLong), 0).sum().item<int64_t>();
  }
  const int64_t* data = tokens.data_ptr<int64_t>();
  return std::vector<int64_t>(data, data + kept);
}

}  // namespace specd::spec
