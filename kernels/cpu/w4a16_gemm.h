#pragma once
// y = x · Wᵀ for an INT4 weight W that stays packed: each weight is dequantized in registers,
// (q - zero_point) · scale, right before it is multiplied, so a call reads ½ byte per weight
// instead of the 4 a float32 GEMM reads. Decode and verify steps (M = 1…31 rows) dequantize in
// the tile; from 32 rows (prefill chunks) the AVX-512 body dequantizes each weight once per row
// block into small panels and multiplies them at the FMA ports' rate. The two add a row's
// products in different orders, so its last bits can differ between a call of fewer than 32 rows
// and one of more (as a BLAS's do between shapes); within either, a row's result does not depend
// on the other rows.
//
// Weight layout: the compressed-tensors `pack-quantized` order, so a checkpoint's
// `weight_packed` tensor is used as it lies in the file. Row n, column k is the nibble at bits
// 4·(k % 8) of word [n, k / 8], holding q + 8 (q in [-8, 7]). A vector lane per nibble of a
// broadcast word unpacks it with a variable shift (then a mask, or a 16-entry table lookup with
// AVX-512), so the words need no repacking. Scales are float32, zero points int8.
#include <cstdint>

#include "kernels/cpu/thread_pool.h"

namespace specd::kernels::cpu {

struct Int4Matrix {
  const int32_t* packed = nullptr;      // [rows, cols / 8]
  const float* scales = nullptr;        // [rows, cols / group_size]
  const int8_t* zero_points = nullptr;  // [rows, cols / group_size], q units; null: symmetric
  int64_t rows = 0;                     // N, output features
  int64_t cols = 0;                     // K, input features; a multiple of 8
  int64_t group_size = 0;               // columns per scale; a multiple of 8 dividing cols
};

// kAvx512 needs cols and group_size to be multiples of 16; other shapes run the AVX2 body.
enum class Int4GemmIsa { kScalar, kAvx2Fma, kAvx512 };

// The fastest implementation this CPU runs.
Int4GemmIsa BestInt4GemmIsa();

// y[m, n] = Σ_k x[m, k] · (q[n, k] - zero_point[n, g]) · scale[n, g], g = k / group_size,
// for x [rows, w.cols] and y [rows, w.rows], both row-major float32. The output rows of W are
// split over the pool's threads. Shapes are the caller's to check (see Int4Matrix).
void W4A16Gemm(const float* x, int64_t rows, const Int4Matrix& w, float* y,
               ThreadPool& pool = ThreadPool::Shared(), Int4GemmIsa isa = BestInt4GemmIsa());

}  // namespace specd::kernels::cpu
