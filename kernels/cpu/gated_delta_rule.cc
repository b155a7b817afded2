#include "kernels/cpu/gated_delta_rule.h"

#include <cmath>
#include <vector>

namespace specd::kernels::cpu {
namespace {

// With d = exp(g) and the old state S, S' = d·S + k δᵀ where δ = β·(v − d·Sᵀk), and
// o = S'ᵀq = d·Sᵀq + (kᵀq)·δ: one pass over S (`from`) gathers Sᵀk and Sᵀq, a second one writes
// S' (`to`, which may be `from`: each element is read before it is written).
__attribute__((target_clones("avx512f", "fma", "default"))) void HeadStep(
    int64_t key_dim, int64_t value_dim, const float* __restrict q, const float* __restrict k,
    const float* __restrict v, float g, float beta, const float* from, float* to,
    float* __restrict out, float* __restrict remembered) {
  const float decay = std::exp(g);
  float kq = 0;
  for (int64_t i = 0; i < value_dim; ++i) remembered[i] = out[i] = 0;
  for (int64_t row = 0; row < key_dim; ++row) {
    const float* s = from + row * value_dim;
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
    const float* s = from + row * value_dim;
    float* s_next = to + row * value_dim;
    for (int64_t i = 0; i < value_dim; ++i) s_next[i] = decay * s[i] + k[row] * remembered[i];
  }
}

}  // namespace

void RecurrentGatedDeltaRule(const DeltaRuleShape& shape, const float* q, const float* k,
                             const float* v, const float* g, const float* beta,
                             const float* initial_state, float* final_state, float* out,
                             ThreadPool& pool) {
  const auto [tokens, heads, key_dim, value_dim] = shape;
  pool.ParallelFor(heads, 1, [&](int64_t first, int64_t last) {
    std::vector<float> scratch(value_dim);
    // Head by head, so that a head's state (64 KiB at 128 × 128) stays in cache over the tokens.
    for (int64_t h = first; h < last; ++h) {
      const float* from = initial_state + h * key_dim * value_dim;
      float* to = final_state + h * key_dim * value_dim;
      for (int64_t t = 0; t < tokens; ++t) {
        const int64_t at = t * heads + h;
        HeadStep(key_dim, value_dim, q + at * key_dim, k + at * key_dim, v + at * value_dim, g[at],
                 beta[at], from, to, out + at * value_dim, scratch.data());
        from = to;
      }
    }
  });
}

}  // namespace specd::kernels::cpu
