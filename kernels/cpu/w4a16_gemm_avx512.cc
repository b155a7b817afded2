// AVX-512 body: 16 lanes, two packed words at a time, dequantized by table lookup. Per group and
// W row, a register holds the 16 values a nibble can stand for; a weight is then one variable
// shift and one vpermps, against shift, mask, convert and fma in the AVX2 body; on two cores the
// M = 1 loop is otherwise limited by instructions rather than by memory.
//
// A 64-bit broadcast puts word 2p in the even lanes and word 2p + 1 in the odd ones; lane i
// shifts by 4·(i / 2), so it holds column 8·(i % 2) + i / 2 of its 16. Rather than shuffle the
// weights, each call reorders x once to match (a cost of K per x row against N·K per call).

// GCC 12 flags the `_mm512_undefined_*` inside its own AVX-512 intrinsics as uninitialized when
// they are inlined into target("avx512f") functions (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "kernels/cpu/w4a16_gemm_internal.h"

#define SPECD_AVX512 __attribute__((target("avx512f,fma")))

namespace specd::kernels::cpu::internal {
namespace {

// x in the lane order above, for every 16 columns of every row.
SPECD_AVX512 void InterleaveColumns(const float* x, int64_t rows, int64_t cols, float* out) {
  const __m512i lane_columns =
      _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  for (int64_t i = 0; i < rows * cols; i += 16) {
    _mm512_storeu_ps(out + i, _mm512_permutexvar_ps(lane_columns, _mm512_loadu_ps(x + i)));
  }
}

// y[m0 + i, n0 + j] for i < kM, j < kN, from x in interleaved lane order.
template <int kM, int kN>
SPECD_AVX512 void Tile(const float* x, const Int4Matrix& w, int64_t m0, int64_t n0, float* y) {
  const int64_t groups = w.cols / w.group_size;
  const int64_t words_per_row = w.cols / 8;
  const int64_t words_per_group = w.group_size / 8;
  const __m512i nibble_shifts =
      _mm512_setr_epi32(0, 0, 4, 4, 8, 8, 12, 12, 16, 16, 20, 20, 24, 24, 28, 28);
  const __m512 nibble_values = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);

  __m512 acc[kM][kN];
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t g = 0; g < groups; ++g) {
    // The 16 weights a nibble can stand for in this group, (nibble - 8 - zero) · scale, exact
    // up to the one rounding of the product, as in the reference.
    __m512 values[kN];
    for (int j = 0; j < kN; ++j) {
      const int64_t at = (n0 + j) * groups + g;
      const float zero = w.zero_points == nullptr ? 0.0f : w.zero_points[at];
      values[j] = _mm512_mul_ps(_mm512_sub_ps(nibble_values, _mm512_set1_ps(8.0f + zero)),
                                _mm512_set1_ps(w.scales[at]));
    }
    for (int64_t word = g * words_per_group; word < (g + 1) * words_per_group; word += 2) {
      __m512 weights[kN];
      for (int j = 0; j < kN; ++j) {
        const int32_t* words = w.packed + (n0 + j) * words_per_row + word;
        PrefetchAhead(words, kN * words_per_row * sizeof(int32_t));
        int64_t pair;
        std::memcpy(&pair, words, sizeof(pair));
        // vpermps reads only the low 4 bits of each index lane, so no mask is needed.
        const __m512i nibbles = _mm512_srlv_epi32(_mm512_set1_epi64(pair), nibble_shifts);
        weights[j] = _mm512_permutexvar_ps(nibbles, values[j]);
      }
      for (int i = 0; i < kM; ++i) {
        const __m512 xs = _mm512_loadu_ps(x + (m0 + i) * w.cols + word * 8);
        for (int j = 0; j < kN; ++j) acc[i][j] = _mm512_fmadd_ps(xs, weights[j], acc[i][j]);
      }
    }
  }
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) y[(m0 + i) * w.rows + n0 + j] = _mm512_reduce_add_ps(acc[i][j]);
  }
}

}  // namespace

SPECD_AVX512 void W4A16GemmAvx512(const float* x, int64_t rows, const Int4Matrix& w,
                                  int64_t n_begin, int64_t n_end, float* y) {
  thread_local std::vector<float> interleaved;
  interleaved.resize(rows * w.cols);
  InterleaveColumns(x, rows, w.cols, interleaved.data());
  const float* xi = interleaved.data();

  // One x row: 8 W rows per tile, enough independent accumulators to cover the FMA latency.
  // Several: 4 x rows by 4 W rows (16 accumulators, 4 dequantized weights, 4 value tables), x
  // rows the inner loop, so a tile's packed weights come from L1 after the first rows.
  constexpr int kSingleRowTile = 8;
  constexpr int kTile = 4;
  int64_t n = n_begin;
  if (rows == 1) {
    for (; n + kSingleRowTile <= n_end; n += kSingleRowTile)
      Tile<1, kSingleRowTile>(xi, w, 0, n, y);
  }
  for (; n + kTile <= n_end; n += kTile) {
    int64_t m = 0;
    for (; m + kTile <= rows; m += kTile) Tile<kTile, kTile>(xi, w, m, n, y);
    switch (rows - m) {
      case 3:
        Tile<3, kTile>(xi, w, m, n, y);
        break;
      case 2:
        Tile<2, kTile>(xi, w, m, n, y);
        break;
      case 1:
        Tile<1, kTile>(xi, w, m, n, y);
        break;
    }
  }
  for (; n < n_end; ++n) {
    int64_t m = 0;
    for (; m + kTile <= rows; m += kTile) Tile<kTile, 1>(xi, w, m, n, y);
    for (; m < rows; ++m) Tile<1, 1>(xi, w, m, n, y);
  }
}

}  // namespace specd::kernels::cpu::internal
