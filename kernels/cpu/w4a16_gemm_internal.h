#pragma once
// The per-ISA bodies behind W4A16Gemm. Each computes the output columns [n_begin, n_end) of
// y [rows, w.rows] for all rows of x; W4A16Gemm splits the columns over threads.
#include <cstdint>

#include "kernels/cpu/w4a16_gemm.h"

namespace specd::kernels::cpu::internal {

// Starts loading the cache line `bytes` past `p` for the tile after the current one, which the
// hardware prefetchers miss (each tile reads several short rows in step). The address may lie
// past the matrix: a prefetch never faults, and it is computed on integers so that no
// out-of-range pointer is formed.
inline void PrefetchAhead(const void* p, int64_t bytes) {
  __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) + bytes));
}

void W4A16GemmScalar(const float* x, int64_t rows, const Int4Matrix& w, int64_t n_begin,
                     int64_t n_end, float* y);

// Needs AVX2 and FMA at run time.
void W4A16GemmAvx2(const float* x, int64_t rows, const Int4Matrix& w, int64_t n_begin,
                   int64_t n_end, float* y);

// Needs AVX-512F and FMA at run time, and w.cols and w.group_size multiples of 16.
void W4A16GemmAvx512(const float* x, int64_t rows, const Int4Matrix& w, int64_t n_begin,
                     int64_t n_end, float* y);

}  // namespace specd::kernels::cpu::internal
