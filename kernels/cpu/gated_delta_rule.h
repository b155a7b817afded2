#pragma once
// The gated delta rule token by token (common/model/ops/ops.h has the maths), fused so that each
// token reads the state once and writes it once (the pass writing a token's state gathers the
// next token's products from it) instead of the five passes a composition of tensor ops makes.
// It serves every length on a CPU — decode steps, verify blocks, prefill chunks, the replay after
// a rollback — as about as many FLOPs per token as the chunked form's matrix products, a block of
// 64 value columns of a head (32 KiB) in L1 over all the tokens.
//
// One call takes several sequences (a batch of decode steps, verify blocks and prefill chunks),
// each on its own state; the pool splits sequences × heads.
//
// Row-major float32: q, k [tokens, heads, key_dim]; v [tokens, heads, value_dim]; g, beta
// [tokens, heads]; out [tokens, heads, value_dim], a sequence's tokens back to back after the
// previous one's; states [heads, key_dim, value_dim].
#include <cstdint>
#include <span>

#include "kernels/cpu/thread_pool.h"

namespace specd::kernels::cpu {

struct DeltaRuleShape {
  int64_t tokens = 0;  // of all the sequences
  int64_t heads = 0;
  int64_t key_dim = 0;
  int64_t value_dim = 0;
};

struct DeltaRuleSequence {
  int64_t tokens = 0;
  // How many of the tokens the state written to `final_state` is after, at most `tokens`. Fewer
  // for a verify block, whose acceptance is not known yet: it stores the state after the accepted
  // tokens of the last block that it replays first (none: nothing is written), and its own tokens
  // run on a copy that stays in cache. No default: a call that leaves it out does not compile.
  int64_t stored_tokens;
  const float* initial_state = nullptr;
  // `initial_state` itself for an update in place (a separate one costs no copy: the first token
  // reads one and writes the other).
  float* final_state = nullptr;
};

void RecurrentGatedDeltaRule(const DeltaRuleShape& shape, const float* q, const float* k,
                             const float* v, const float* g, const float* beta,
                             std::span<const DeltaRuleSequence> sequences, float* out,
                             ThreadPool& pool = ThreadPool::Shared());

}  // namespace specd::kernels::cpu
