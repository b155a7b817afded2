#include "common/engine/draft_session.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace specd::engine {

absl::StatusOr<DraftOptions> ResolveDraftOptions(const DraftOptions& options,
                                                 int64_t trained_block_size,
                                                 int64_t trained_window) {
  DraftOptions resolved = options;
  if (resolved.block_size == 0) resolved.block_size = trained_block_size;
  if (resolved.window == 0) resolved.window = trained_window;
  if (resolved.block_size < 1 || resolved.block_size > trained_block_size) {
    return absl::InvalidArgumentError(absl::StrCat("block_size = ", resolved.block_size,
                                                   " is outside [1, ", trained_block_size,
                                                   "] (the drafter's block size)"));
  }
  if (resolved.window < 0) {
    return absl::InvalidArgumentError(absl::StrCat("window = ", resolved.window, " must be ≥ 0"));
  }
  if (!(resolved.min_confidence >= 0 && resolved.min_confidence <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_confidence = ", resolved.min_confidence, " is outside [0, 1]"));
  }
  const DraftSampling& sampling = resolved.sampling;
  if (!(sampling.temperature >= 0 && std::isfinite(sampling.temperature)) || sampling.top_k < 0 ||
      !(sampling.top_p > 0 && sampling.top_p <= 1) ||
      !(sampling.min_p >= 0 && sampling.min_p <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling (temperature ", sampling.temperature, ", top_k ", sampling.top_k,
                     ", top_p ", sampling.top_p, ", min_p ", sampling.min_p,
                     ") is outside temperature ≥ 0, top_k ≥ 0, top_p in (0, 1], min_p in [0, 1]"));
  }
  return resolved;
}

std::vector<absl::StatusOr<DraftProposal>> Drafter::ProposeBatch(
    std::span<const DraftCall> batch) const {
  std::vector<absl::StatusOr<DraftProposal>> proposals;
  proposals.reserve(batch.size());
  for (const DraftCall& call : batch) {
    absl::Status appended = absl::OkStatus();
    for (const CommittedContext& context : call.context) {
      if (appended = call.session->Append(context); !appended.ok()) break;
    }
    proposals.push_back(appended.ok() ? call.session->Propose(call.anchor, call.count, call.options,
                                                              call.report_confidence)
                                      : absl::StatusOr<DraftProposal>(appended));
  }
  return proposals;
}

}  // namespace specd::engine
