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
  at::Tensor out = logits.to(at::kFloat).clone();
  if (params_.repetition_penalty != 1 && (!prompt.empty() || !generated.empty())) {
    const at::Tensor seen = at::cat({TokenTensor(prompt, out), TokenTensor(generated, out)});
    const at::Tensor values = out.index_select(0, seen);
    out.index_put_({seen}, at::where(values > 0, values / params_.repetition_penalty,
                                     values * params_.repetition_penalty));
  }
  if ((params_.presence_penalty != 0 || params_.frequency_penalty != 0) && !generated.empty()) {
    const at::Tensor ids = TokenTensor(generated, out);
    at::Tensor counts = at::zeros_like(out).index_add_(0, ids, at::ones_like(ids, out.options()));
    out.sub_(at::where(counts > 0, params_.presence_penalty, 0.0) +
             counts * params_.frequency_penalty);
  }
  if (static_cast<int64_t>(generated.size()) < params_.min_new_tokens &&
      !params_.ending_ids.empty()) {
    out.index_fill_(0, TokenTensor(params_.ending_ids, out), kNegativeInfinity);
  }
  return out;
}

at::Tensor Sampler::Probabilities(const at::Tensor& logits, std::span<const int64_t> prompt,
                                  std::span<const int64_t> generated) const {
  at::Tensor scores = PenalisedLogits(logits, prompt, generated);
  if (greedy()) return at::zeros_like(scores).index_fill_(0, scores.argmax(), 1.0);
  scores.div_(params_.temperature);
  const int64_t vocab = scores.size(0);
  if (params_.top_k > 0 && params_.top_k < vocab) {
    const at::Tensor kth = std::get<0>(scores.topk(params_.top_k)).select(0, params_.top_k - 1);
    scores.masked_fill_(scores < kth, kNegativeInfinity);
  }
  at::Tensor probs = at::softmax(scores, 0);
  if (params_.top_p < 1) {
    const auto [sorted, order] = probs.sort(/*dim=*/0, /*descending=*/true);
    // A token stays while the tokens ranked above it hold less than top_p; the first always does.
    const at::Tensor above = sorted.cumsum(0) - sorted;
    probs.index_put_({order.masked_select(above >= params_.top_p)}, 0.0);
  }
  if (params_.min_p > 0) {
    probs.masked_fill_(probs < probs.max() * params_.min_p, 0.0);
  }
  return probs / probs.sum();
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
  const at::Tensor cumulative = probabilities.cumsum(0);
  // Inverse CDF with our own uniform, so a seed means the same tokens on any device.
  const at::Tensor u = at::full({1}, Uniform(), cumulative.options());
  const int64_t token =
      at::searchsorted(cumulative, u, /*out_int32=*/false, /*right=*/true).item<int64_t>();
  if (token < cumulative.size(0)) return token;
  // u rounded past the last of the mass: the last index that has some.
  return (probabilities > 0).nonzero().max().item<int64_t>();
}

double Sampler::Uniform() {
  return static_cast<double>(random_() >> 11) * 0x1.0p-53;  // 53 random bits
}

}  // namespace specd::model
