#include "common/engine/dflash_block_drafter.h"

#include <ATen/ATen.h>

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace specd::engine {
namespace {

class DFlashDraftSession final : public DraftSession {
 public:
  DFlashDraftSession(const model::DFlashDrafter& drafter, const model::TokenHead& head,
                     model::DFlashCache cache)
      : drafter_(drafter), head_(head), cache_(std::move(cache)) {}

  int64_t length() const override { return cache_.length(); }

  absl::Status Append(const CommittedContext& context) override {
    if (context.begin > cache_.length()) {
      return absl::OutOfRangeError(absl::StrCat("context from position ", context.begin,
                                                " leaves a gap after the drafter's ",
                                                cache_.length()));
    }
    if (context.begin < cache_.length()) {
      if (absl::Status truncated = cache_.Truncate(context.begin); !truncated.ok()) {
        return truncated;
      }
    }
    if (!context.rows.defined() || context.rows.size(0) == 0) return absl::OkStatus();
    const model::ModelOptions& options = drafter_.options();
    return drafter_.AppendContext(context.rows.to(options.device, options.dtype), cache_);
  }

  absl::StatusOr<DraftProposal> Propose(int64_t anchor, int64_t count, const DraftOptions& options,
                                        bool report_confidence) override {
    if (count <= 0) return DraftProposal();
    // Always the whole block: attention is non-causal, so a shorter block would change the
    // proposals that are kept.
    std::vector<int64_t> block(options.block_size, drafter_.config().mask_token_id);
    block[0] = anchor;
    const c10::Device device = head_.embed_tokens().device();
    absl::StatusOr<at::Tensor> hidden = drafter_.DraftBlock(
        head_.Embed(at::tensor(block, at::kLong).to(device)), cache_, {.window = options.window});
    if (!hidden.ok()) return hidden.status();
    const at::Tensor logits = head_.Head(hidden->narrow(0, 1, count));
    if (options.min_confidence <= 0 && !report_confidence) {
      const at::Tensor tokens = logits.argmax(-1).cpu();
      const int64_t* ids = tokens.data_ptr<int64_t>();
      return DraftProposal{.tokens = std::vector<int64_t>(ids, ids + count), .confidence = {}};
    }
    // The probabilities (a softmax over the vocabulary per token) only when they are used.
    const auto [probability, token] = at::softmax(logits, -1).max(-1);
    const at::Tensor tokens = token.cpu();
    const at::Tensor confidence = probability.to(at::kFloat).cpu().contiguous();
    int64_t kept = count;
    if (options.min_confidence > 0) {
      // The first position below the threshold and everything after it are dropped.
      kept = at::cumprod((confidence >= options.min_confidence).to(at::kLong), 0)
                 .sum()
                 .item<int64_t>();
    }
    const int64_t* ids = tokens.data_ptr<int64_t>();
    const float* confidences = confidence.data_ptr<float>();
    return DraftProposal{.tokens = std::vector<int64_t>(ids, ids + kept),
                         .confidence = report_confidence
                                           ? std::vector<float>(confidences, confidences + kept)
                                           : std::vector<float>()};
  }

 private:
  const model::DFlashDrafter& drafter_;
  const model::TokenHead& head_;
  model::DFlashCache cache_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DFlashBlockDrafter>> DFlashBlockDrafter::Create(
    model::DFlashDrafter drafter, model::TokenHead head,
    const io::Qwen35TextConfig& target_config) {
  if (absl::Status fits = drafter.CheckTarget(target_config); !fits.ok()) return fits;
  return std::unique_ptr<DFlashBlockDrafter>(
      new DFlashBlockDrafter(std::move(drafter), std::move(head)));
}

DFlashBlockDrafter::DFlashBlockDrafter(model::DFlashDrafter drafter, model::TokenHead head)
    : drafter_(std::move(drafter)), head_(std::move(head)) {}

std::vector<int64_t> DFlashBlockDrafter::TargetHiddenStates() const {
  return drafter_.TargetHiddenStates();
}

absl::StatusOr<DraftOptions> DFlashBlockDrafter::Resolve(const DraftOptions& options) const {
  return ResolveDraftOptions(options, block_size());
}

absl::StatusOr<std::unique_ptr<DraftSession>> DFlashBlockDrafter::OpenSession(
    int64_t max_length) const {
  absl::StatusOr<model::DFlashCache> cache = drafter_.NewCache(max_length);
  if (!cache.ok()) return cache.status();
  return std::make_unique<DFlashDraftSession>(drafter_, head_, *std::move(cache));
}

}  // namespace specd::engine
