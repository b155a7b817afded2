#pragma once
// Rejection sampling's messages as the contract carries them: how a drafter draws a request's
// drafts (drafter.proto's DraftSampling, which the orchestrator writes and the drafter service
// reads) and the distribution each draft was drawn from (types.proto's DraftDistribution, which
// the drafter service writes, the orchestrator passes on and the verifier reads).
#include <vector>

#include "common/engine/draft_sampling.h"
#include "common/engine/ports.h"
#include "specd/v1/drafter.pb.h"
#include "specd/v1/types.pb.h"

namespace specd::rpc {

inline v1::DraftSampling ToProto(const engine::DraftSampling& sampling) {
  v1::DraftSampling out;
  out.set_temperature(static_cast<float>(sampling.temperature));
  out.set_top_k(static_cast<uint32_t>(sampling.top_k));
  out.set_top_p(static_cast<float>(sampling.top_p));
  out.set_min_p(static_cast<float>(sampling.min_p));
  out.set_seed(sampling.seed);
  return out;
}

inline engine::DraftSampling FromProto(const v1::DraftSampling& sampling) {
  return {.temperature = sampling.temperature(),
          .top_k = sampling.top_k(),
          .top_p = sampling.top_p() > 0 ? sampling.top_p() : 1.0,  // the wire's 0 is "off"
          .min_p = sampling.min_p(),
          .seed = sampling.seed()};
}

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
