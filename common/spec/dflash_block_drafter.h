#pragma once
// The DFlash drafter as a BlockDrafter (research/dflash.md §3): the committed positions' tapped
// target features go into its context cache; a proposal is one non-causal forward over
// [anchor, MASK × (B − 1)] whose hidden states the target's head turns into greedy tokens.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/dflash_cache.h"
#include "common/model/dflash_drafter.h"
#include "common/model/qwen35_model.h"
#include "common/spec/block_drafter.h"

namespace specd::spec {

struct DFlashBlockOptions {
  int64_t block_size = 0;  // tokens per block with the anchor, at most the drafter's; 0: its own
  int64_t window = 0;      // model::DraftOptions::window; 0: none
  // Adaptive draft length: the proposals stop before the first position whose most likely token
  // has a draft probability below this, so unlikely drafts cost no verify work. 0: fixed blocks.
  double min_confidence = 0;
};

class DFlashBlockDrafter final : public BlockDrafter {
 public:
  // Fails unless `drafter` fits `target` (DFlashDrafter::CheckTarget) and the options are in
  // range. `target` (its embedding and head) must outlive the result.
  static absl::StatusOr<std::unique_ptr<DFlashBlockDrafter>> Create(
      model::DFlashDrafter drafter, const model::Qwen35Model& target,
      const DFlashBlockOptions& options);

  int64_t block_size() const override { return block_size_; }
  std::vector<int64_t> TargetHiddenStates() const override;
  absl::Status Start(const CommittedContext& prompt, int64_t max_length) override;
  absl::StatusOr<std::vector<int64_t>> Propose(int64_t anchor, int64_t max_tokens) override;
  absl::Status Commit(const CommittedContext& context) override;

 private:
  DFlashBlockDrafter(model::DFlashDrafter drafter, const model::Qwen35Model& target,
                     const DFlashBlockOptions& options, int64_t block_size);

  model::DFlashDrafter drafter_;
  const model::Qwen35Model& target_;
  DFlashBlockOptions options_;
  int64_t block_size_;
  std::optional<model::DFlashCache> cache_;
};

}  // namespace specd::spec
