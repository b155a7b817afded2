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
#include "common/model/token_head.h"
#include "common/engine/block_drafter.h"

namespace specd::engine {

struct DFlashBlockOptions {
  int64_t block_size = 0;  // tokens per block with the anchor, at most the drafter's; 0: its own
  int64_t window = 0;      // model::DraftOptions::window; 0: none
  // Adaptive draft length: the proposals stop before the first position whose most likely token
  // has a draft probability below this, so unlikely drafts cost no verify work. 0: fixed blocks.
  double min_confidence = 0;
};

// OK when `drafter` fits the target of `target_config` (DFlashDrafter::CheckTarget) and the
// options are in range; the block size the options ask for, or the drafter's own.
absl::StatusOr<int64_t> CheckDFlashBlockOptions(const model::DFlashDrafter& drafter,
                                                const io::Qwen35TextConfig& target_config,
                                                const DFlashBlockOptions& options);

struct DraftProposal {
  std::vector<int64_t> tokens;
  // The drafter's probability of each token, when reported.
  std::vector<float> confidence;
};

// One non-causal forward over [anchor, MASK × (block_size − 1)] on `cache`, whose context ends
// just before the anchor: up to `count` (< block_size) greedy proposals read off the target's
// head, cut before the first one less likely than options.min_confidence. The probabilities
// (a softmax over the vocabulary per token) are computed only for that cut or when
// `report_confidence` asks for them.
absl::StatusOr<DraftProposal> ProposeBlock(const model::DFlashDrafter& drafter,
                                           const model::TokenHead& head, model::DFlashCache& cache,
                                           int64_t anchor, int64_t block_size, int64_t count,
                                           const DFlashBlockOptions& options,
                                           bool report_confidence);

class DFlashBlockDrafter final : public BlockDrafter {
 public:
  // Fails unless CheckDFlashBlockOptions does. `head` (the target's embedding and head) must
  // outlive the result.
  static absl::StatusOr<std::unique_ptr<DFlashBlockDrafter>> Create(
      model::DFlashDrafter drafter, const model::TokenHead& head,
      const io::Qwen35TextConfig& target_config, const DFlashBlockOptions& options);

  int64_t block_size() const override { return block_size_; }
  std::vector<int64_t> TargetHiddenStates() const override;
  absl::Status Start(const CommittedContext& prompt, int64_t max_length) override;
  absl::StatusOr<std::vector<int64_t>> Propose(int64_t anchor, int64_t max_tokens) override;
  absl::Status Commit(const CommittedContext& context) override;

 private:
  DFlashBlockDrafter(model::DFlashDrafter drafter, const model::TokenHead& head,
                     const DFlashBlockOptions& options, int64_t block_size);

  model::DFlashDrafter drafter_;
  const model::TokenHead& head_;
  DFlashBlockOptions options_;
  int64_t block_size_;
  std::optional<model::DFlashCache> cache_;
};

}  // namespace specd::engine
