#include "kernels/cpu/gated_delta_rule.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace specd::kernels::cpu {
namespace {

// Columns of the state are independent: column j of S' depends on column j of S alone. So the
// recurrence runs on blocks of kColumns columns of a head, each over all the call's tokens: a
// block's state (32 KiB at 128 key rows) stays in L1 from token to token, where a whole head's
// (64 KiB) would come from L2, and its sums stay in registers over the rows (summed per column
// over the rows in order: the same arithmetic whatever the block).
constexpr int64_t kColumns = 64;

// 16 floats, which GCC lowers to one AVX-512 register, two AVX ones or four SSE ones in each
// clone below. Written as such (rather than as loops over float arrays) so that the sums stay in
// registers: as arrays, GCC kept them on the stack, a store and a reload per row, which made
// the step latency-bound (measured: 4.5× slower on a verify block).
typedef float Floats16 __attribute__((vector_size(64)));

// Always inlined into the clones, so the ABI a 64-byte vector would have between functions
// compiled for different ISAs (GCC's warning) never applies.
#pragma GCC diagnostic ignored "-Wpsabi"
template <typename Lanes>
__attribute__((always_inline)) inline Lanes Load(const float* p) {
  Lanes x;
  std::memcpy(&x, p, sizeof x);
  return x;
}
template <typename Lanes>
__attribute__((always_inline)) inline void Store(float* p, const Lanes& x) {
  std::memcpy(p, &x, sizeof x);
}

// With d = exp(g) and the old state S, S' = d·S + k δᵀ where δ = β·(v − d·Sᵀk), and
// o = S'ᵀq = d·Sᵀq + (kᵀq)·δ. A token takes Sᵀk and Sᵀq (its sums), then writes S'; the pass
// that writes S' also gathers the next token's sums from it, so the state is read once a token.
// Columns [0, kCount · lanes) of v, out and the states, as kCount of `Lanes` (float or Floats16);
// rows of the state `row_stride` apart.
template <typename Lanes, int kCount>
struct TokenSums {
  Lanes remembered[kCount];  // Sᵀk
  Lanes recalled[kCount];    // Sᵀq
  float kq = 0;
};

// The sums of the token with keys k and queries q against the state at `from`.
template <typename Lanes, int kCount>
__attribute__((always_inline)) inline TokenSums<Lanes, kCount> Gather(
    int64_t key_dim, int64_t row_stride, const float* q, const float* k, const float* from) {
  constexpr int64_t kLanes = sizeof(Lanes) / sizeof(float);
  TokenSums<Lanes, kCount> sums;
  for (int i = 0; i < kCount; ++i) sums.remembered[i] = sums.recalled[i] = Lanes{} * 0.0f;
  for (int64_t row = 0; row < key_dim; ++row) {
    const float* s = from + row * row_stride;
#pragma GCC unroll 8
    for (int i = 0; i < kCount; ++i) {
      const Lanes state = Load<Lanes>(s + i * kLanes);
      sums.remembered[i] += k[row] * state;
      sums.recalled[i] += q[row] * state;
    }
    sums.kq += k[row] * q[row];
  }
  return sums;
}

// Writes S' = decay·S + k δᵀ from `from` to `to` (which may be `from`: each element is read
// before it is written) and, with kGatherNext, returns the sums of the token with keys next_k
// and queries next_q against S', in the same order as Gather's.
template <typename Lanes, int kCount, bool kGatherNext>
__attribute__((always_inline)) inline TokenSums<Lanes, kCount> Advance(
    int64_t key_dim, int64_t row_stride, const float* k, float decay, const Lanes* delta,
    const float* from, float* to, const float* next_q, const float* next_k) {
  constexpr int64_t kLanes = sizeof(Lanes) / sizeof(float);
  TokenSums<Lanes, kCount> next;
  for (int i = 0; i < kCount; ++i) next.remembered[i] = next.recalled[i] = Lanes{} * 0.0f;
  for (int64_t row = 0; row < key_dim; ++row) {
    const float* s = from + row * row_stride;
    float* s_next = to + row * row_stride;
#pragma GCC unroll 8
    for (int i = 0; i < kCount; ++i) {
      const Lanes state = decay * Load<Lanes>(s + i * kLanes) + k[row] * delta[i];
      Store(s_next + i * kLanes, state);
      if constexpr (kGatherNext) {
        next.remembered[i] += next_k[row] * state;
        next.recalled[i] += next_q[row] * state;
      }
    }
    if constexpr (kGatherNext) next.kq += next_k[row] * next_q[row];
  }
  return next;
}

// Where head h's state goes: the first `stored` tokens advance `final_state`, the others a
// scratch copy (a head's worth, of which a column block touches its own columns).
struct HeadStates {
  const float* initial;
  float* final;
  float* scratch;
  int64_t stored;
};

// Columns [column, column + kCount · lanes) of head h over every token.
template <typename Lanes, int kCount>
__attribute__((always_inline)) inline void ColumnsOverTokens(const DeltaRuleShape& shape, int64_t h,
                                                             int64_t column, const float* q,
                                                             const float* k, const float* v,
                                                             const float* g, const float* beta,
                                                             const HeadStates& states, float* out) {
  const auto [tokens, heads, key_dim, value_dim] = shape;
  if (tokens == 0) return;
  constexpr int64_t kLanes = sizeof(Lanes) / sizeof(float);
  const float* from = states.initial + h * key_dim * value_dim + column;
  float* const stored = states.final + h * key_dim * value_dim + column;
  float* const scratch = states.scratch + column;
  TokenSums<Lanes, kCount> sums =
      Gather<Lanes, kCount>(key_dim, value_dim, q + h * key_dim, k + h * key_dim, from);
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t at = t * heads + h;
    const float decay = std::exp(g[at]);
    Lanes delta[kCount];
    for (int i = 0; i < kCount; ++i) {
      delta[i] = beta[at] * (Load<Lanes>(v + at * value_dim + column + i * kLanes) -
                             decay * sums.remembered[i]);
      Store(out + at * value_dim + column + i * kLanes,
            decay * sums.recalled[i] + sums.kq * delta[i]);
    }
    float* to = t < states.stored ? stored : scratch;
    const float* k_at = k + at * key_dim;
    if (t + 1 < tokens) {
      const int64_t next = at + heads;
      sums = Advance<Lanes, kCount, true>(key_dim, value_dim, k_at, decay, delta, from, to,
                                          q + next * key_dim, k + next * key_dim);
    } else {
      Advance<Lanes, kCount, false>(key_dim, value_dim, k_at, decay, delta, from, to, nullptr,
                                    nullptr);
    }
    from = to;
  }
}

__attribute__((target_clones("avx512f", "fma", "default"))) void Head(
    const DeltaRuleShape& shape, int64_t h, const float* q, const float* k, const float* v,
    const float* g, const float* beta, const HeadStates& states, float* out) {
  int64_t column = 0;
  for (; column + kColumns <= shape.value_dim; column += kColumns) {
    ColumnsOverTokens<Floats16, kColumns / 16>(shape, h, column, q, k, v, g, beta, states, out);
  }
  for (; column < shape.value_dim; ++column) {
    ColumnsOverTokens<float, 1>(shape, h, column, q, k, v, g, beta, states, out);
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
        thread_local std::vector<float> scratch;
        scratch.resize(shape.key_dim * shape.value_dim);  // allocates once per thread
        for (int64_t p = first; p < last; ++p) {
          const DeltaRuleSequence& sequence = sequences[p / heads];
          const int64_t t = first_token[p / heads];
          DeltaRuleShape own = shape;
          own.tokens = sequence.tokens;
          const HeadStates states{.initial = sequence.initial_state,
                                  .final = sequence.final_state,
                                  .scratch = scratch.data(),
                                  .stored = sequence.stored_tokens};
          Head(own, p % heads, q + t * heads * shape.key_dim, k + t * heads * shape.key_dim,
               v + t * heads * shape.value_dim, g + t * heads, beta + t * heads, states,
               out + t * heads * shape.value_dim);
        }
      });
}

}  // namespace specd::kernels::cpu
