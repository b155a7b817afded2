#pragma once
// What the speculative engine needs from a drafter: given what the target has committed, propose
// the tokens that follow an anchor. The engine tells it about every committed position exactly
// once, as it commits them, with the target hidden states the drafter asked for. A LibTorch
// failure inside a drafter may escape as c10::Error; the engine turns it into a status.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace specd::engine {

// Positions the target has just committed: their ids and, per TargetHiddenStates() index, their
// hidden states [ids.size(), hidden].
struct CommittedContext {
  std::span<const int64_t> ids;
  std::vector<at::Tensor> hidden_states;
};

class BlockDrafter {
 public:
  virtual ~BlockDrafter() = default;

  // Tokens per verify block: the anchor and up to block_size() − 1 proposals.
  virtual int64_t block_size() const = 0;

  // The target hidden_states indices (ForwardOptions::hidden_states) the drafter reads.
  virtual std::vector<int64_t> TargetHiddenStates() const = 0;

  // Starts a sequence with its prompt; no sequence will be longer than `max_length` positions.
  virtual absl::Status Start(const CommittedContext& prompt, int64_t max_length) = 0;

  // Up to min(block_size() − 1, max_tokens) proposals for the positions after `anchor`, the
  // last token generated, which itself follows the committed positions.
  virtual absl::StatusOr<std::vector<int64_t>> Propose(int64_t anchor, int64_t max_tokens) = 0;

  // Appends positions the target has committed since Start or the last Commit.
  virtual absl::Status Commit(const CommittedContext& context) = 0;
};

}  // namespace specd::engine
