#pragma once
// The DFlash drafter as the engine's Drafter (research/dflash.md §3): a session's committed
// positions go into its context cache as the target's tapped features; a proposal is one
// non-causal forward over [anchor, MASK × (B − 1)] whose hidden states the target's head turns
// into greedy tokens — the head's rows of the drafter's pruned vocabulary only, when it has one
// (verification keeps the full head).
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/draft_session.h"
#include "common/io/qwen35_config.h"
#include "common/model/dflash_drafter.h"
#include "common/model/token_head.h"

namespace specd::engine {

class DFlashBlockDrafter final : public Drafter {
 public:
  // Fails unless `drafter` fits the target of `target_config` (DFlashDrafter::CheckTarget).
  // `head` is the target's embedding and head.
  static absl::StatusOr<std::unique_ptr<DFlashBlockDrafter>> Create(
      model::DFlashDrafter drafter, model::TokenHead head,
      const io::Qwen35TextConfig& target_config);

  int64_t block_size() const override { return drafter_.config().block_size; }
  std::vector<int64_t> TargetHiddenStates() const override;
  bool ReadsTokenIds() const override { return false; }  // the anchor is all it reads of ids
  absl::StatusOr<DraftOptions> Resolve(const DraftOptions& options) const override;
  absl::StatusOr<std::unique_ptr<DraftSession>> OpenSession(int64_t max_length) const override;
  model::CacheFootprint SessionFootprint() const override;
  // One forward of the context projection over every call's new context, then one over every
  // call's block, then one head product over every proposal row.
  std::vector<absl::StatusOr<DraftProposal>> ProposeBatch(
      std::span<const DraftCall> batch) const override;

  const model::DFlashDrafter& model() const { return drafter_; }

 private:
  DFlashBlockDrafter(model::DFlashDrafter drafter, model::TokenHead head, at::Tensor draft_head);

  // Logits [rows, vocab or draft vocab] float32 of the drafter's final hidden states.
  at::Tensor Logits(const at::Tensor& hidden) const;

  model::DFlashDrafter drafter_;
  model::TokenHead head_;
  at::Tensor draft_head_;  // the head's rows of drafter_.draft_vocab(); undefined without one
};

}  // namespace specd::engine
