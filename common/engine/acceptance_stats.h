#pragma once
// What speculative decoding achieved on one request: how many tokens each verify step emitted
// (its acceptance length, research/dflash.md §3), how often each block position's draft was
// accepted, and where the time went.
#include <cstdint>
#include <vector>

namespace specd::engine {

struct AcceptanceStats {
  // Per verify step, the tokens it emitted: the accepted drafts plus the target's own next token;
  // fewer only where the output stopped inside the step.
  std::vector<int64_t> acceptance_lengths;
  // [i]: the steps that proposed a draft at block position i + 1, and those where it was accepted.
  std::vector<int64_t> proposed_at;
  std::vector<int64_t> accepted_at;
  // Steps that verified no draft: the block had room for one token only, or the drafter was lost.
  int64_t target_only_steps = 0;
  double draft_ms = 0;   // drafter: proposals and taking in the accepted context
  double verify_ms = 0;  // target: block forward, sampling, rollback

  // One verify step that proposed `proposed` drafts, accepted the first `accepted` and emitted
  // `emitted` tokens.
  void RecordStep(int64_t proposed, int64_t accepted, int64_t emitted);
  // Adds another request's steps and times to these.
  void Merge(const AcceptanceStats& other);

  int64_t steps() const { return static_cast<int64_t>(acceptance_lengths.size()); }
  // The mean acceptance length τ; 0 before any step.
  double tau() const;
};

}  // namespace specd::engine
