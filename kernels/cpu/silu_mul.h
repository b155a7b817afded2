#pragma once
// The SwiGLU MLP's activation, silu(gate) · up, elementwise over float32 (out may be either
// input): one pass in place of LibTorch's silu (a scalar exponential per element in Debian's
// build) and product. The pool splits it from 16 Ki elements.
#include <cstdint>

#include "kernels/cpu/thread_pool.h"

namespace specd::kernels::cpu {

void SiluMul(const float* gate, const float* up, int64_t count, float* out,
             ThreadPool& pool = ThreadPool::Shared());

}  // namespace specd::kernels::cpu
