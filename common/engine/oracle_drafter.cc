#include "common/engine/oracle_drafter.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <span>

#include "common/engine/reusable_cache.h"

namespace specd::engine {

OracleDrafter::OracleDrafter(const model::Qwen35Model& target, int64_t block_size)
    : target_(target), block_size_(block_size) {}

absl::Status OracleDrafter::Start(const CommittedContext& prompt, int64_t max_length) {
  absl::StatusOr<model::Qwen35Cache*> cache = CacheFor(target_, cache_, max_length);
  if (!cache.ok()) return cache.status();
  (*cache)->Reset();
  fed_.clear();
  committed_.assign(prompt.ids.begin(), prompt.ids.end());
  return Sync();
}

absl::Status OracleDrafter::Commit(const CommittedContext& context) {
  committed_.insert(committed_.end(), context.ids.begin(), context.ids.end());
  return absl::OkStatus();
}

absl::Status OracleDrafter::Sync() {
  if (!cache_.has_value()) return absl::FailedPreconditionError("Propose before Start");
  const bool behind =
      fed_.size() <= committed_.size() && std::equal(fed_.begin(), fed_.end(), committed_.begin());
  if (!behind) {
    cache_->Reset();
    fed_.clear();
  }
  if (fed_.size() < committed_.size()) {
    const std::span<const int64_t> missing = std::span(committed_).subspan(fed_.size());
    if (absl::StatusOr<model::ForwardOutput> fed = target_.Extend(missing, *cache_); !fed.ok()) {
      return fed.status();
    }
    fed_ = committed_;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> OracleDrafter::Propose(int64_t anchor, int64_t max_tokens) {
  const int64_t count = std::min(block_size_ - 1, max_tokens);
  if (count <= 0) return std::vector<int64_t>();
  if (absl::Status synced = Sync(); !synced.ok()) return synced;
  std::vector<int64_t> proposals;
  int64_t next = anchor;
  while (static_cast<int64_t>(proposals.size()) < count) {
    absl::StatusOr<at::Tensor> logits = target_.Decode(next, *cache_);
    if (!logits.ok()) return logits.status();
    fed_.push_back(next);
    next = logits->argmax().item<int64_t>();
    proposals.push_back(next);
  }
  return proposals;
}

}  // namespace specd::engine
