#include "common/engine/oracle_drafter.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <span>
#include <utility>

namespace specd::engine {
namespace {

class OracleDraftSession final : public DraftSession {
 public:
  OracleDraftSession(const model::Qwen35Model& target, model::Qwen35Cache cache)
      : target_(target), cache_(std::move(cache)) {}

  int64_t length() const override { return static_cast<int64_t>(committed_.size()); }

  absl::Status Append(const CommittedContext& context) override {
    if (context.begin > length()) {
      return absl::OutOfRangeError("context leaves a gap after the oracle's positions");
    }
    committed_.resize(context.begin);
    committed_.insert(committed_.end(), context.ids.begin(), context.ids.end());
    return absl::OkStatus();
  }

  absl::StatusOr<DraftProposal> Propose(int64_t anchor, int64_t count, const DraftOptions& options,
                                        bool) override {
    if (count <= 0) return DraftProposal();
    if (absl::Status synced = Sync(); !synced.ok()) return synced;
    const bool drawn = options.sampling.temperature > 0;
    model::Sampler sampler(options.sampling.ForBlock(length()));
    DraftProposal proposal;
    int64_t next = anchor;
    while (static_cast<int64_t>(proposal.tokens.size()) < count) {
      absl::StatusOr<at::Tensor> logits = target_.Decode(next, cache_);
      if (!logits.ok()) return logits.status();
      fed_.push_back(next);
      if (drawn) {
        auto [token, distribution] = DrawDraft(*logits, sampler);
        next = token;
        proposal.distributions.push_back(std::move(distribution));
      } else {
        next = logits->argmax().item<int64_t>();
      }
      proposal.tokens.push_back(next);
    }
    return proposal;
  }

 private:
  // Brings the cache to exactly the committed ids: feeds what it lacks, or starts over where its
  // own proposals were not all accepted (a Qwen35Cache cannot shed decoded tokens).
  absl::Status Sync() {
    const bool behind = fed_.size() <= committed_.size() &&
                        std::equal(fed_.begin(), fed_.end(), committed_.begin());
    if (!behind) {
      cache_.Reset();
      fed_.clear();
    }
    if (fed_.size() < committed_.size()) {
      const std::span<const int64_t> missing = std::span(committed_).subspan(fed_.size());
      if (absl::StatusOr<model::ForwardOutput> fed = target_.Extend(missing, cache_); !fed.ok()) {
        return fed.status();
      }
      fed_ = committed_;
    }
    return absl::OkStatus();
  }

  const model::Qwen35Model& target_;
  model::Qwen35Cache cache_;
  std::vector<int64_t> committed_;
  std::vector<int64_t> fed_;  // what the cache holds
};

}  // namespace

OracleDrafter::OracleDrafter(const model::Qwen35Model& target, int64_t block_size)
    : target_(target), block_size_(block_size) {}

absl::StatusOr<DraftOptions> OracleDrafter::Resolve(const DraftOptions& options) const {
  if (options.window != 0 || options.min_confidence != 0) {
    return absl::InvalidArgumentError(
        "a draft window and adaptive draft length apply to DFlash drafters, not the oracle");
  }
  return ResolveDraftOptions(options, block_size_, /*trained_window=*/0);
}

absl::StatusOr<std::unique_ptr<DraftSession>> OracleDrafter::OpenSession(int64_t max_length) const {
  absl::StatusOr<model::Qwen35Cache> cache = target_.NewCache(max_length);
  if (!cache.ok()) return cache.status();
  return std::make_unique<OracleDraftSession>(target_, *std::move(cache));
}

model::CacheFootprint OracleDrafter::SessionFootprint() const {
  return target_.SequenceFootprint();
}

}  // namespace specd::engine
