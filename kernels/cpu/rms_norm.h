#pragma once
// RMS norms over rows of float32 (a token's hidden state, or one head of it), the pool splitting
// the rows:
//   RmsNorm:      out = x / √(mean(x²) + eps) · s,  s = 1 + w (zero-centred: Qwen3.5's) or w
//   GatedRmsNorm: out = x / √(mean(x²) + eps) · w · silu(gate)  (the Gated DeltaNet's output)
// One pass over a row in place of LibTorch's half a dozen ops and temporaries, each a dispatch:
// at a decode step's few rows those, not the arithmetic, were the cost. Statistics in float32 as
// the reference's, summed in another order (16 lanes).
//
// x, gate and out [rows, dim] row-major (out may be x); weight [dim].
#include <cstdint>

#include "kernels/cpu/thread_pool.h"

namespace specd::kernels::cpu {

void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, bool zero_centred,
             float eps, float* out, ThreadPool& pool = ThreadPool::Shared());

void GatedRmsNorm(const float* x, const float* gate, int64_t rows, int64_t dim, const float* weight,
                  float eps, float* out, ThreadPool& pool = ThreadPool::Shared());

}  // namespace specd::kernels::cpu
