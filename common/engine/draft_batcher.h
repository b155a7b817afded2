#pragma once
// The drafter's step scheduler: the proposals every session waits for go into one
// Drafter::ProposeBatch (one forward over all their blocks for a DFlash drafter), formed as
// StepBatcher says. In-process ports and the drafter service both call it.
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/draft_session.h"
#include "common/engine/ports.h"
#include "common/engine/step_batcher.h"

namespace specd::engine {

struct DraftJob;  // one session's call in the queue

class DraftBatcher {
 public:
  // `drafter` must outlive the batcher.
  DraftBatcher(const Drafter& drafter, BatchingOptions options);

  // `call` in the next batch that has room; blocks until done. A session's calls are serial.
  // `forward`, if given, is told about the forward that ran it.
  absl::StatusOr<DraftProposal> Propose(const DraftCall& call, DraftForward* forward = nullptr);

  using Membership = StepBatcher<DraftJob>::Membership;
  Membership Join() { return batcher_.Join(); }

  BatchingStats stats() const { return batcher_.stats(); }

 private:
  std::vector<bool> Step(std::span<DraftJob* const> batch) const;

  const Drafter& drafter_;
  StepBatcher<DraftJob> batcher_;
};

}  // namespace specd::engine
