#include "common/engine/draft_sampling.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

namespace specd::engine {
namespace {

// SplitMix64's finaliser: nearby inputs give unrelated seeds.
uint64_t Mix(uint64_t value) {
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;

}  // namespace

model::SamplingParams DraftSampling::ForBlock(int64_t position) const {
  return {.temperature = temperature,
          .top_k = top_k,
          .top_p = top_p,
          .min_p = min_p,
          .seed = Mix(seed + kGoldenGamma * static_cast<uint64_t>(position + 1))};
}

DraftSampling DraftSamplingFor(const model::SamplingParams& sampling) {
  // The target's stream starts from the seed itself; the drafter's must not repeat its draws.
  return {.temperature = sampling.temperature,
          .top_k = sampling.top_k,
          .top_p = sampling.top_p,
          .min_p = sampling.min_p,
          .seed = Mix(sampling.seed ^ kGoldenGamma)};
}

std::pair<int64_t, DraftDistribution> DrawDraft(const at::Tensor& logits, model::Sampler& sampler) {
  const int64_t support = std::min(DraftSampling::kDraftSupport, logits.size(-1));
  const auto [top_logits, top_ids] = logits.to(at::kFloat).topk(support);
  const at::Tensor ids = top_ids.cpu();
  // Temperature and the request's truncations over the support, then normalised.
  const at::Tensor q = sampler.Probabilities(top_logits.cpu(), {}, {});
  const int64_t token = ids[sampler.Draw(q)].item<int64_t>();
  const at::Tensor kept = q.nonzero().squeeze(1);
  const at::Tensor kept_ids = ids.index_select(0, kept).contiguous();
  const at::Tensor kept_q = q.index_select(0, kept).contiguous();
  return {token,
          {.ids = std::vector<int64_t>(kept_ids.data_ptr<int64_t>(),
                                       kept_ids.data_ptr<int64_t>() + kept_ids.numel()),
           .probabilities = std::vector<float>(kept_q.data_ptr<float>(),
                                               kept_q.data_ptr<float>() + kept_q.numel())}};
}

}  // namespace specd::engine
