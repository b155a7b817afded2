#pragma once
// The gated delta rule token by token (common/model/ops/ops.h has the maths), fused so that each
// token reads the state twice and writes it once instead of the five passes a composition of
// tensor ops makes. It serves every length on a CPU — decode steps, verify blocks, prefill
// chunks, the replay after a rollback — as about as many FLOPs per token as the chunked form's
// matrix products, a block of 64 value columns of a head (32 KiB) in L1 over all the tokens.
//
// Row-major float32: q, k [tokens, heads, key_dim]; v [tokens, heads, value_dim]; g, beta
// [tokens, heads]; initial_state, final_state [heads, key_dim, value_dim] (the same pointer for
// an update in place: a separate one costs no copy, the first token reads one and writes the
// other); out [tokens, heads, value_dim]. Heads are split over the pool's threads.
#include <cstdint>

#include "kernels/cpu/thread_pool.h"

namespace specd::kernels::cpu {

struct DeltaRuleShape {
  int64_t tokens = 0;
  int64_t heads = 0;
  int64_t key_dim = 0;
  int64_t value_dim = 0;
};

void RecurrentGatedDeltaRule(const DeltaRuleShape& shape, const float* q, const float* k,
                             const float* v, const float* g, const float* beta,
                             const float* initial_state, float* final_state, float* out,
                             ThreadPool& pool = ThreadPool::Shared());

}  // namespace specd::kernels::cpu
