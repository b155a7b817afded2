#pragma once
// A model drafter and the suffix drafter together: each step proposes what the one with the
// larger expected accepted length proposes, Σₖ Πᵢ≤ₖ confidenceᵢ over its tokens (the model's
// confidences are its draft probabilities; the suffix drafter's, the share of earlier
// occurrences that went on that way). The model drafts every step, batched as alone; the
// suffix index costs microseconds. Model drafters are weak exactly where text repeats itself
// (code, templates, filler), which is where the suffix drafter is sure.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/draft_session.h"
#include "common/engine/suffix_drafter.h"

namespace specd::engine {

// Σₖ Πᵢ≤ₖ confidence[i]: how many of the tokens verification is expected to accept, when each
// is accepted with its confidence given the ones before it were.
double ExpectedAcceptedLength(std::span<const float> confidence);

class CombinedDrafter final : public Drafter {
 public:
  explicit CombinedDrafter(std::unique_ptr<Drafter> model);

  int64_t block_size() const override { return model_->block_size(); }
  std::vector<int64_t> TargetHiddenStates() const override { return model_->TargetHiddenStates(); }
  bool ReadsTokenIds() const override { return true; }  // the suffix index's
  absl::StatusOr<DraftOptions> Resolve(const DraftOptions& options) const override {
    return model_->Resolve(options);
  }
  absl::StatusOr<std::unique_ptr<DraftSession>> OpenSession(int64_t max_length) const override;
  model::CacheFootprint SessionFootprint() const override;
  // The model's calls in one batch (ProposeBatch of the model), each then weighed against the
  // suffix drafter's proposal.
  std::vector<absl::StatusOr<DraftProposal>> ProposeBatch(
      std::span<const DraftCall> batch) const override;

 private:
  const std::unique_ptr<const Drafter> model_;
  SuffixDrafter suffix_;
};

}  // namespace specd::engine
