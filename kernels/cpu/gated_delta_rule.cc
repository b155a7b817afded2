#include "kernels/cpu/gated_delta_rule.h"

#include <cmath>
#include <vector>

namespace specd::kernels::cpu {
namespace {

// Columns of the state are independent: column j of S' depends on column j of S alone. So the
// recurrence runs on blocks of kColumns columns of a head, each over all the call's tokens: a
// block's state (32 KiB at 128 key rows) stays in L1 from token to token, where a whole head's
// (64 KiB) would come from L2, and its sums stay in registers over the rows (summed per column
// over the rows in order: the same arithmetic whatever the block).
constexpr int64_t kColumns = 64;

// With d = exp(g) and the old state S, S' = d·S + k δᵀ where δ = β·(v − d·Sᵀk), and
// o = S'ᵀq = d·Sᵀq + (kᵀq)·δ: one pass over S (`from`) gathers Sᵀk and Sᵀq, a second one writes
// S' (`to`, which may be `from`: each element is read before it is written). Columns
// [0, kWidth) of v, out, from and to; rows of the state `row_stride` apart.
template <int64_t kWidth>
__attribute__((always_inline)) inline void ColumnsStep(int64_t key_dim, int64_t row_stride,
                                                       const float* q, const float* k,
                                                       const float* v, float g, float beta,
                                                       const float* from, float* to, float* out) {
  const float decay = std::exp(g);
  float kq = 0;
  float remembered[kWidth] = {}, recalled[kWidth] = {};
  for (int64_t row = 0; row < key_dim; ++row) {
    const float* s = from + row * row_stride;
    for (int64_t i = 0; i < kWidth; ++i) {
      remembered[i] += k[row] * s[i];
      recalled[i] += q[row] * s[i];
    }
    kq += k[row] * q[row];
  }
  float delta[kWidth];
  for (int64_t i = 0; i < kWidth; ++i) {
    delta[i] = beta * (v[i] - decay * remembered[i]);
    out[i] = decay * recalled[i] + kq * delta[i];
  }
  for (int64_t row = 0; row < key_dim; ++row) {
    const float* s = from + row * row_stride;
    float* s_next = to + row * row_stride;
    for (int64_t i = 0; i < kWidth; ++i) s_next[i] = decay * s[i] + k[row] * delta[i];
  }
}

// Columns [column, column + kWidth) of head h over every token.
template <int64_t kWidth>
__attribute__((always_inline)) inline void ColumnsOverTokens(const DeltaRuleShape& shape, int64_t h,
                                                             int64_t column, const float* q,
                                                             const float* k, const float* v,
                                                             const float* g, const float* beta,
                                                             const float* initial_state,
                                                             float* final_state, float* out) {
  const auto [tokens, heads, key_dim, value_dim] = shape;
  const float* from = initial_state + h * key_dim * value_dim + column;
  float* to = final_state + h * key_dim * value_dim + column;
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t at = t * heads + h;
    ColumnsStep<kWidth>(key_dim, value_dim, q + at * key_dim, k + at * key_dim,
                        v + at * value_dim + column, g[at], beta[at], from, to,
                        out + at * value_dim + column);
    from = to;
  }
}

__attribute__((target_clones("avx512f", "fma", "default"))) void Head(
    const DeltaRuleShape& shape, int64_t h, const float* q, const float* k, const float* v,
    const float* g, const float* beta, const float* initial_state, float* final_state, float* out) {
  int64_t column = 0;
  for (; column + kColumns <= shape.value_dim; column += kColumns) {
    ColumnsOverTokens<kColumns>(shape, h, column, q, k, v, g, beta, initial_state, final_state,
                                out);
  }
  for (; column < shape.value_dim; ++column) {
    ColumnsOverTokens<1>(shape, h, column, q, k, v, g, beta, initial_state, final_state, out);
  }
}

}  // namespace

void RecurrentGatedDeltaRule(const DeltaRuleShape& shape, const float* q, const float* k,
                             const float* v, const float* g, const float* beta,
                             std::span<const DeltaRuleSequence> sequences, float* out,
                             ThreadPool& pool) {
  std::vector<int64_t> first_token(sequences.size() + 1, 0);
  for (size_t s = 0; s < sequences.size(); ++s) {
    first_token[s + 1] = first_token[s] + sequences[s].tokens;
  }
  const int64_t heads = shape.heads;
  pool.ParallelFor(
      static_cast<int64_t>(sequences.size()) * heads, 1, [&](int64_t first, int64_t last) {
        for (int64_t p = first; p < last; ++p) {
          const DeltaRuleSequence& sequence = sequences[p / heads];
          const int64_t t = first_token[p / heads];
          DeltaRuleShape own = shape;
          own.tokens = sequence.tokens;
          Head(own, p % heads, q + t * heads * shape.key_dim, k + t * heads * shape.key_dim,
               v + t * heads * shape.value_dim, g + t * heads, beta + t * heads,
               sequence.initial_state, sequence.final_state, out + t * heads * shape.value_dim);
        }
      });
}

}  // namespace specd::kernels::cpu
