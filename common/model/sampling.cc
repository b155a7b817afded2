#include "common/model/sampling.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "common/model/ops/ops.h"

namespace specd::model {
namespace {

constexpr float kNegativeInfinity = -std::numeric_limits<float>::infinity();

at::Tensor TokenTensor(std::span<const int64_t> tokens, const at::Tensor& like) {
  return at::tensor(std::vector<int64_t>(tokens.begin(), tokens.end()), at::kLong)
      .to(like.device());
}

}  // namespace

Sampler::Sampler(const SamplingParams& params) : params_(params), random_(params.seed) {}

at::Tensor Sampler::PenalisedLogits(const at::Tensor& logits, std::span<const int64_t> prompt,
                                    std::span<const int64_t> generated) const {
  // Each penalty makes a new tensor: without one, the logits themselves (no copy of a row).
  at::Tensor out = logits.to(at::kFloat);
  if (params_.repetition_penalty != 1 && (!prompt.empty() || !generated.empty())) {
    const at::Tensor seen = at::cat({TokenTensor(prompt, out), TokenTensor(generated, out)});
    const at::Tensor values = out.index_select(0, seen);
    out = out.index_put({seen}, at::where(values > 0, values / params_.repetition_penalty,
                                          values * params_.repetition_penalty));
  }
  if ((params_.presence_penalty != 0 || params_.frequency_penalty != 0) && !generated.empty()) {
    const at::Tensor ids = TokenTensor(generated, out);
    at::Tensor counts = at::zeros_like(out).index_add_(0, ids, at::ones_like(ids, out.options()));
    out = out - (at::where(counts > 0, params_.presence_penalty, 0.0) +
                 counts * params_.frequency_penalty);
  }
  if (static_cast<int64_t>(generated.size()) < params_.min_new_tokens &&
      !params_.ending_ids.empty()) {
    out = out.index_fill(0, TokenTensor(params_.ending_ids, out), kNegativeInfinity);
  }
  return out;
}

at::Tensor Sampler::Probabilities(const at::Tensor& logits, std::span<const int64_t> prompt,
                                  std::span<const int64_t> generated) const {
  const at::Tensor scores = PenalisedLogits(logits, prompt, generated);
  if (greedy()) return at::zeros_like(scores).index_fill_(0, scores.argmax(), 1.0);
  return ops::TruncatedSoftmax(scores, {.temperature = params_.temperature,
                                        .top_k = params_.top_k,
                                        .top_p = params_.top_p,
                                        .min_p = params_.min_p});
}

int64_t Sampler::Sample(const at::Tensor& logits, std::span<const int64_t> prompt,
                        std::span<const int64_t> generated) {
  if (greedy()) return PenalisedLogits(logits, prompt, generated).argmax().item<int64_t>();
  return Draw(Probabilities(logits, prompt, generated));
}

std::vector<int64_t> Sampler::GreedyTokens(const at::Tensor& logits,
                                           std::span<const int64_t> prompt,
                                           std::span<const int64_t> generated,
                                           std::span<const int64_t> continuation,
                                           std::span<const int64_t> most_likely) const {
  const int64_t rows = logits.size(0);
  const bool penalised = params_.repetition_penalty != 1 || params_.presence_penalty != 0 ||
                         params_.frequency_penalty != 0 ||
                         static_cast<int64_t>(generated.size()) < params_.min_new_tokens;
  if (!penalised && static_cast<int64_t>(most_likely.size()) >= rows) {
    return {most_likely.begin(), most_likely.begin() + rows};
  }
  at::Tensor best;
  if (!penalised) {
    best = ops::RowArgmax(logits);
  } else {
    std::vector<int64_t> seen(generated.begin(), generated.end());
    std::vector<at::Tensor> scores;
    for (int64_t i = 0; i < rows; ++i) {
      scores.push_back(PenalisedLogits(logits[i], prompt, seen));
      if (i < static_cast<int64_t>(continuation.size())) seen.push_back(continuation[i]);
    }
    best = ops::RowArgmax(at::stack(scores));
  }
  const at::Tensor host = best.to(at::kCPU, at::kLong).contiguous();
  return {host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + rows};
}

int64_t Sampler::Draw(const at::Tensor& probabilities) {
  // Inverse CDF with our own uniform, so a seed means the same tokens on any device.
  return ops::InverseCdf(probabilities, Uniform());
}

double Sampler::Uniform() {
  return static_cast<double>(random_() >> 11) * 0x1.0p-53;  // 53 random bits
}

}  // namespace specd::model
