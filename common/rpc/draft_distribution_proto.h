#pragma once
// A draft's distribution (rejection sampling) as the contract carries it (types.proto): the
// drafter service writes it, the orchestrator passes it on, the verifier reads it.
#include <vector>

#include "common/engine/ports.h"
#include "specd/v1/types.pb.h"

namespace specd::rpc {

inline v1::DraftDistribution ToProto(const engine::DraftDistribution& distribution) {
  v1::DraftDistribution out;
  out.mutable_token_ids()->Assign(distribution.ids.begin(), distribution.ids.end());
  out.mutable_probabilities()->Assign(distribution.probabilities.begin(),
                                      distribution.probabilities.end());
  return out;
}

inline engine::DraftDistribution FromProto(const v1::DraftDistribution& distribution) {
  return {
      .ids = std::vector<int64_t>(distribution.token_ids().begin(), distribution.token_ids().end()),
      .probabilities = std::vector<float>(distribution.probabilities().begin(),
                                          distribution.probabilities().end())};
}

}  // namespace specd::rpc
