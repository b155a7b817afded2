#include "kernels/cpu/gated_delta_rule.h"

#include <cmath>
#include <vector>

namespace specd::kernels::cpu {
namespace {

// With d = exp(g) and the old state S, S' = d·S + k δᵀ where δ = β·(v − d·Sᵀk), and
// o = S'ᵀq = d·Sᵀq + (kᵀq)·δ: one pass over S gathers Sᵀk and Sᵀq, a second one updates it.
__attribute__((target_clones("fma", "default"))) void HeadStep(
    int64_t key_dim, int64_t value_dim, const float* __restrict q, const float* __restrict k,
    const float* __restrict v, float g, float beta, float* __restrict state, float* __restrict out,
    float* __restrict remembered) {
  const float decay = std::exp(g);
  float kq = 0;
  for (int64_t i = 0; i < value_dim; ++i) remembered[i] = out[i] = 0;
  for (int64_t row = 0; row < key_dim; ++row) {
    const float* s = state + row * value_dim;
    for (int64_t i = 0; i < value_dim; ++i) {
      remembered[i] += k[row] * s[i];
      out[i] += q[row] * s[i];
    }
    kq += k[row] * q[row];
  }
  for (int64_t i = 0; i < value_dim; ++i) {
    const float delta = beta * (v[i] - decay * remembered[i]);
    remembered[i] = delta;
    out[i] = decay * out[i] + kq * delta;
  }
  for (int64_t row = 0; row < key_dim; ++row) {
    float* s = state + row * value_dim;
    for (int64_t i = 0; i < value_dim; ++i) s[i] = decay * s[i] + k[row] * remembered[i];
  }
}

}  // namespace

void RecurrentGatedDeltaRule(const DeltaRuleShape& shape, const float* q, const float* k,
                             const float* v, const float* g, const float* beta, float* state,
                             float* out, ThreadPool& pool) {
  const auto [tokens, heads, key_dim, value_dim] = shape;
  pool.ParallelFor(heads, 1, [&](int64_t first, int64_t last) {
    std::vector<float> scratch(value_dim);
    // Head by head, so that a head's state (64 KiB at 128 × 128) stays in cache over the tokens.
    for (int64_t h = first; h < last; ++h) {
      for (int64_t t = 0; t < tokens; ++t) {
        const int64_t at = t * heads + h;
        HeadStep(key_dim, value_dim, q + at * key_dim, k + at * key_dim, v + at * value_dim, g[at],
                 beta[at], state + h * key_dim * value_dim, out + at * value_dim, scratch.data());
      }
    }
  });
}

}  // namespace specd::kernels::cpu
