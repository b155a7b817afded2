#pragma once
// y = W x for a dense float32 weight W [rows, cols] (row-major) and one input row: the decode
// step's projections. Memory-bound, so the only aims are to read W once, in order, with every
// core of the pool streaming its own run of rows (BLAS gemv brings a thread pool of its own that
// fights LibTorch's for the same cores).
#include <cstdint>

#include "kernels/cpu/thread_pool.h"

namespace specd::kernels::cpu {

void DenseGemv(const float* w, int64_t rows, int64_t cols, const float* x, float* y,
               ThreadPool& pool = ThreadPool::Shared());

}  // namespace specd::kernels::cpu
