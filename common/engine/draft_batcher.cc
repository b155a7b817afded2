#include "common/engine/draft_batcher.h"

#include <c10/core/InferenceMode.h>

#include <optional>
#include <utility>

#include "common/base/clock.h"

namespace specd::engine {

struct DraftJob {
  const DraftCall* call = nullptr;
  std::optional<absl::StatusOr<DraftProposal>> result;
  DraftForward forward;

  int64_t rows() const {
    int64_t rows = call->count > 0 ? call->options.block_size : 0;
    for (const CommittedContext& context : call->context) {
      if (context.rows.defined()) rows += context.rows.size(0);
    }
    return rows;
  }
  bool urgent() const { return true; }
};

DraftBatcher::DraftBatcher(const Drafter& drafter, BatchingOptions options)
    : drafter_(drafter),
      batcher_(options, [this](std::span<DraftJob* const> batch) { return Step(batch); }) {}

absl::StatusOr<DraftProposal> DraftBatcher::Propose(const DraftCall& call, DraftForward* forward) {
  DraftJob job{.call = &call, .result = std::nullopt, .forward = {}};
  const auto queued = batcher_.Run(job);
  job.forward.queued_ms = base::Milliseconds(queued);
  if (forward != nullptr) *forward = job.forward;
  return *std::move(job.result);
}

std::vector<bool> DraftBatcher::Step(std::span<DraftJob* const> batch) const {
  // No autograd bookkeeping in a served forward (torch.inference_mode's): its ops dispatch
  // faster and its views carry no history. The sessions' caches were made outside it; only steps
  // like this one write them.
  const c10::InferenceMode inference;
  std::vector<DraftCall> calls;
  calls.reserve(batch.size());
  DraftForward forward;
  for (const DraftJob* job : batch) {
    calls.push_back(*job->call);
    forward.rows += job->rows();
    forward.drafts += job->call->count;
  }
  std::vector<absl::StatusOr<DraftProposal>> proposals = drafter_.ProposeBatch(calls);
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i]->result = std::move(proposals[i]);
    batch[i]->forward = forward;
  }
  return std::vector<bool>(batch.size(), true);
}

}  // namespace specd::engine
