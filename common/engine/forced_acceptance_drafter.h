#pragma once
// A drafter whose acceptance is fixed in advance, to measure the engine at a given τ whatever the
// drafter's quality (issue 18's forced τ = 6 benchmark, `bench serve --force-tau`): the wrapped
// drafter runs in full, then its first τ − 1 proposals of each block are replaced by the tokens a
// greedy target-only run produced at those positions and the τ-th by a different token, so greedy
// verification accepts τ − 1 drafts and adds its own token: τ tokens per step. It holds one
// reference per prompt; a session follows the reference its committed ids are a prefix of. For
// greedy requests: where a sequence follows no reference (a sampled one leaves it at its first
// draw that differs) or runs past it, the proposals stay the drafter's, and drafts drawn for
// rejection sampling are refused.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/draft_session.h"

namespace specd::engine {

class ForcedAcceptanceDrafter final : public Drafter {
 public:
  // `references`: each a prompt's ids followed by the target's greedy continuation (the id at
  // each absolute position); `tau` in [1, model's block size]; `vocab_size` > 1 (the τ-th token
  // is the reference's + 1 modulo it).
  static absl::StatusOr<std::unique_ptr<ForcedAcceptanceDrafter>> Create(
      const Drafter& model, std::vector<std::vector<int64_t>> references, int64_t tau,
      int64_t vocab_size);

  int64_t block_size() const override { return model_.block_size(); }
  std::vector<int64_t> TargetHiddenStates() const override { return model_.TargetHiddenStates(); }
  // Its sessions tell their sequences apart by the committed ids.
  bool ReadsTokenIds() const override { return true; }
  absl::StatusOr<DraftOptions> Resolve(const DraftOptions& options) const override {
    return model_.Resolve(options);
  }
  absl::StatusOr<std::unique_ptr<DraftSession>> OpenSession(int64_t max_length) const override;
  model::CacheFootprint SessionFootprint() const override { return model_.SessionFootprint(); }
  // The model's calls in one batch, as it batches them; each proposal then forced.
  std::vector<absl::StatusOr<DraftProposal>> ProposeBatch(
      std::span<const DraftCall> batch) const override;

  // The first reference that `ids` are a prefix of; empty if none.
  std::span<const int64_t> ReferenceOf(std::span<const int64_t> ids) const;
  // Rewrites `proposal`, the block after `anchor`, which sits at absolute position `position`
  // of a sequence following `reference`.
  absl::Status Force(std::span<const int64_t> reference, int64_t anchor, int64_t position,
                     const DraftOptions& options, DraftProposal& proposal) const;

 private:
  ForcedAcceptanceDrafter(const Drafter& model, std::vector<std::vector<int64_t>> references,
                          int64_t tau, int64_t vocab_size);

  const Drafter& model_;
  const std::vector<std::vector<int64_t>> references_;
  const int64_t tau_;
  const int64_t vocab_size_;
};

}  // namespace specd::engine
