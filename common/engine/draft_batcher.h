#pragma once
// The drafter's step scheduler: the proposals every session waits for go into one
// Drafter::ProposeBatch (one forward over all their blocks for a DFlash drafter), formed as
// StepBatcher says. In-process ports and the drafter service both call it.
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/draft_session.h"
#include "common/engine/step_batcher.h"

namespace specd::engine {

struct DraftJob;  // one session's call in the queue

class DraftBatcher {
 public:
  // `drafter` must outlive the batcher.
  DraftBatcher(const Drafter& drafter, BatchingOptions options);

  // `call` in the next batch that has room; blocks until done. A session's calls are serial.
  // `queued_ms`, if given: how long the call waited for its forward to start.
  absl::StatusOr<DraftProposal> Propose(const DraftCall& call, double* queued_ms = nullptr);

  using Membership = StepBatcher<DraftJob>::Membership;
  Membership Join() { return batcher_.Join(); }

  BatchingStats stats() const { return batcher_.stats(); }

 private:
  std::vector<bool> Step(std::span<DraftJob* const> batch) const;

  const Drafter& drafter_;
  StepBatcher<DraftJob> batcher_;
};

}  // namespace specd::engine
