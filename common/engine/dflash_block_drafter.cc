#include "common/engine/dflash_block_drafter.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/engine/reusable_cache.h"

namespace specd::engine {

absl::StatusOr<int64_t> CheckDFlashBlockOptions(const model::DFlashDrafter& drafter,
                                                const io::Qwen35TextConfig& target_config,
                                                const DFlashBlockOptions& options) {
  if (absl::Status fits = drafter.CheckTarget(target_config); !fits.ok()) return fits;
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
  return block_size;
}

absl::StatusOr<DraftProposal> ProposeBlock(const model::DFlashDrafter& drafter,
                                           const model::TokenHead& head, model::DFlashCache& cache,
                                           int64_t anchor, int64_t block_size, int64_t count,
                                           const DFlashBlockOptions& options,
                                           bool report_confidence) {
  if (count <= 0) return DraftProposal();
  // Always the whole block: attention is non-causal, so a shorter block would change the
  // proposals that are kept.
  std::vector<int64_t> block(block_size, drafter.config().mask_token_id);
  block[0] = anchor;
  const c10::Device device = head.embed_tokens().device();
  absl::StatusOr<at::Tensor> hidden = drafter.DraftBlock(
      head.Embed(at::tensor(block, at::kLong).to(device)), cache, {.window = options.window});
  if (!hidden.ok()) return hidden.status();
  const at::Tensor logits = head.Head(hidden->narrow(0, 1, count));
  if (options.min_confidence <= 0 && !report_confidence) {
    const at::Tensor tokens = logits.argmax(-1).cpu();
    const int64_t* ids = tokens.data_ptr<int64_t>();
    return DraftProposal{.tokens = std::vector<int64_t>(ids, ids + count), .confidence = {}};
  }
  const auto [probability, token] = at::softmax(logits, -1).max(-1);
  const at::Tensor tokens = token.cpu();
  const at::Tensor confidence = probability.to(at::kFloat).cpu().contiguous();
  int64_t kept = count;
  if (options.min_confidence > 0) {
    // The first position below the threshold and everything after it are dropped.
    kept =
        at::cumprod((confidence >= options.min_confidence).to(at::kLong), 0).sum().item<int64_t>();
  }
  const int64_t* ids = tokens.data_ptr<int64_t>();
  const float* confidences = confidence.data_ptr<float>();
  return DraftProposal{.tokens = std::vector<int64_t>(ids, ids + kept),
                       .confidence = report_confidence
                                         ? std::vector<float>(confidences, confidences + kept)
                                         : std::vector<float>()};
}

absl::StatusOr<std::unique_ptr<DFlashBlockDrafter>> DFlashBlockDrafter::Create(
    model::DFlashDrafter drafter, const model::TokenHead& head,
    const io::Qwen35TextConfig& target_config, const DFlashBlockOptions& options) {
  absl::StatusOr<int64_t> block_size = CheckDFlashBlockOptions(drafter, target_config, options);
  if (!block_size.ok()) return block_size.status();
  return std::unique_ptr<DFlashBlockDrafter>(
      new DFlashBlockDrafter(std::move(drafter), head, options, *block_size));
}

DFlashBlockDrafter::DFlashBlockDrafter(model::DFlashDrafter drafter, const model::TokenHead& head,
                                       const DFlashBlockOptions& options, int64_t block_size)
    : drafter_(std::move(drafter)), head_(head), options_(options), block_size_(block_size) {}

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
  absl::StatusOr<DraftProposal> proposal =
      ProposeBlock(drafter_, head_, *cache_, anchor, block_size_,
                   std::min(block_size_ - 1, max_tokens), options_,
                   /*report_confidence=*/false);
  if (!proposal.ok()) return proposal.status();
  return std::move(proposal->tokens);
}

}  // namespace specd::engine
