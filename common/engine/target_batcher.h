#pragma once
// The target's step scheduler: the pending steps of every session — verify blocks, target-only
// decode steps (blocks of one) and prefill chunks — go into one batched forward
// (Qwen35Model::ForwardBatch), formed as StepBatcher says. In-process ports and the
// target-verifier service both call it, so every caller batches the same way.
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/step_batcher.h"
#include "common/engine/target_session.h"
#include "common/model/qwen35_model.h"

namespace specd::engine {

struct TargetJob;  // one session's step in the queue

class TargetBatcher {
 public:
  // `target` must outlive the batcher.
  TargetBatcher(const model::Qwen35Model& target, BatchingOptions options);

  // TargetSession's steps, run in the next batches that have room; they block until done. A
  // session's calls are serial; a LibTorch failure fails every session of its batch (INTERNAL).
  absl::StatusOr<TargetStep> Prefill(TargetSession& session);
  absl::StatusOr<TargetStep> Verify(TargetSession& session, const Drafts& drafts);

  // Held by each open session, so that a step waits for the sessions about to come back.
  using Membership = StepBatcher<TargetJob>::Membership;
  Membership Join() { return batcher_.Join(); }

  BatchingStats stats() const { return batcher_.stats(); }

 private:
  absl::StatusOr<TargetStep> Run(TargetSession& session);
  std::vector<bool> Step(std::span<TargetJob* const> batch) const;

  const model::Qwen35Model& target_;
  StepBatcher<TargetJob> batcher_;
};

}  // namespace specd::engine
