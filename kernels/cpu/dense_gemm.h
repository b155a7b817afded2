#pragma once
// y = x Wᵀ for a dense weight W [rows, cols] (row-major) in float32 or bfloat16 as stored — a
// bf16 checkpoint's matrices are never widened in memory, only in registers — and a few input
// rows x [m, cols] float32: decode steps, verify blocks and batched decode. Products are exact
// (a bf16 weight widens to float32 exactly) and summed in float32. At one row the product is
// memory-bound, so W is read once, in order, each core of the pool streaming its own run of
// rows (BLAS brings a thread pool of its own that fights LibTorch's for the same cores); at more,
// a tile of 4 x rows by 4 W rows keeps 16 accumulators busy on one read of the tile's weights.
#include <cstdint>

#include "kernels/cpu/thread_pool.h"

namespace specd::kernels::cpu {

struct DenseMatrix {
  const void* data = nullptr;  // [rows, cols] row-major
  bool bf16 = false;           // bfloat16 bits (uint16), else float32
  int64_t rows = 0;
  int64_t cols = 0;
};

// y [m, w.rows] = x [m, w.cols] · Wᵀ, row-major float32.
void DenseGemm(const float* x, int64_t m, const DenseMatrix& w, float* y,
               ThreadPool& pool = ThreadPool::Shared());

}  // namespace specd::kernels::cpu
