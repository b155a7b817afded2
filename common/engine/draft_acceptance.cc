#include "common/engine/draft_acceptance.h"

namespace specd::engine {

absl::StatusOr<int64_t> AcceptDrafts(const at::Tensor& logits, std::span<const int64_t> block,
                                     model::Sampler& sampler, std::span<const int64_t> prompt,
                                     const std::vector<int64_t>& generated, const EmitToken& emit) {
  const auto drafts = static_cast<int64_t>(block.size()) - 1;
  for (int64_t i = 0;; ++i) {
    // `generated` grows with every emit, so each row sees the output up to its own position.
    const int64_t token = sampler.Sample(logits[i], prompt, generated);
    absl::StatusOr<bool> ended = emit(token);
    if (!ended.ok()) return ended.status();
    if (*ended || i == drafts || block[i + 1] != token) return i;
  }
}

}  // namespace specd::engine
