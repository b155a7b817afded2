#pragma once
// Rejection sampling's drafter side (draft_acceptance.h has the verifier's): how a drafter draws
// a sampled request's drafts, and the distributions it reports with them for the verifier's
// min(1, p / q) test.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>

#include "common/engine/ports.h"
#include "common/model/sampling.h"

namespace specd::engine {

// How a drafter draws the drafts of a sampled request under rejection sampling: from its own
// distribution, processed like the target's (temperature,
// then top-k, top-p and min-p) over its kDraftSupport most likely tokens. The draws of the block
// anchored after position n come from (seed, n) alone, so any drafter, in process or remote,
// proposes the same block.
struct DraftSampling {
  static constexpr int64_t kDraftSupport = 32;

  double temperature = 0;  // 0: the most likely tokens, no distributions
  int64_t top_k = 0;
  double top_p = 1;
  double min_p = 0;
  uint64_t seed = 0;

  // The parameters of a model::Sampler that draws the block anchored after `position`.
  model::SamplingParams ForBlock(int64_t position) const;
};

// The drafts' sampling for a request sampled with `sampling` (the target's): its truncations and
// a seed of its own.
DraftSampling DraftSamplingFor(const model::SamplingParams& sampling);

// One draft drawn with `sampler` (made from DraftSampling::ForBlock) from a drafter's `logits`
// [vocab]: the token, and the distribution over the kDraftSupport most likely tokens it was drawn
// from.
std::pair<int64_t, DraftDistribution> DrawDraft(const at::Tensor& logits, model::Sampler& sampler);

}  // namespace specd::engine
