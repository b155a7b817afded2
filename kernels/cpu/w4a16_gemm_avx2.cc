// AVX2 + FMA body. Only the functions marked SPECD_AVX2 use those instructions, so this file builds
// with the project's baseline flags and runs only where BestInt4GemmIsa() found the CPU support.
//
// A tile of kM rows of x by kN rows of W keeps kM·kN accumulators of 8 lanes in registers. Per
// packed word (8 columns) each W row is dequantized once, in registers: broadcast the word,
// shift lane i right by 4·i, mask the nibble, convert, then fma(u, scale, -(zero + 8)·scale);
// the kM rows of x then reuse it. The tile shapes keep accumulators, the dequantized words and
// the constants within the 16 vector registers.
#include <immintrin.h>

#include "kernels/cpu/w4a16_gemm_internal.h"

#define SPECD_AVX2 __attribute__((target("avx2,fma")))

namespace specd::kernels::cpu::internal {
namespace {

SPECD_AVX2 inline float HorizontalSum(__m256 v) {
  const __m128 pairs = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 quads = _mm_add_ps(pairs, _mm_movehl_ps(pairs, pairs));
  return _mm_cvtss_f32(_mm_add_ss(quads, _mm_movehdup_ps(quads)));
}

// y[m0 + i, n0 + j] for i < kM, j < kN.
template <int kM, int kN>
SPECD_AVX2 void Tile(const float* x, const Int4Matrix& w, int64_t m0, int64_t n0, float* y) {
  const int64_t groups = w.cols / w.group_size;
  const int64_t words_per_row = w.cols / 8;
  const int64_t words_per_group = w.group_size / 8;
  const __m256i nibble_shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const __m256i nibble_mask = _mm256_set1_epi32(0xF);

  __m256 acc[kM][kN];
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  for (int64_t g = 0; g < groups; ++g) {
    __m256 scale[kN];
    __m256 offset[kN];  // the stored nibble is q + 8, so w = nibble·s - (zero + 8)·s
    for (int j = 0; j < kN; ++j) {
      const int64_t at = (n0 + j) * groups + g;
      const float s = w.scales[at];
      const float zero = 8.0f + (w.zero_points == nullptr ? 0.0f : w.zero_points[at]);
      scale[j] = _mm256_set1_ps(s);
      offset[j] = _mm256_set1_ps(-zero * s);
    }
    for (int64_t word = g * words_per_group; word < (g + 1) * words_per_group; ++word) {
      __m256 weights[kN];
      for (int j = 0; j < kN; ++j) {
        const int32_t* packed_word = w.packed + (n0 + j) * words_per_row + word;
        PrefetchAhead(packed_word, kN * words_per_row * sizeof(int32_t));
        const __m256i packed = _mm256_set1_epi32(*packed_word);
        const __m256i nibbles =
            _mm256_and_si256(_mm256_srlv_epi32(packed, nibble_shifts), nibble_mask);
        weights[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(nibbles), scale[j], offset[j]);
      }
      for (int i = 0; i < kM; ++i) {
        const __m256 xs = _mm256_loadu_ps(x + (m0 + i) * w.cols + word * 8);
        for (int j = 0; j < kN; ++j) acc[i][j] = _mm256_fmadd_ps(xs, weights[j], acc[i][j]);
      }
    }
  }
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) y[(m0 + i) * w.rows + n0 + j] = HorizontalSum(acc[i][j]);
  }
}

}  // namespace

SPECD_AVX2 void W4A16GemmAvx2(const float* x, int64_t rows, const Int4Matrix& w, int64_t n_begin,
                              int64_t n_end, float* y) {
  // One x row: 4 W rows per tile (4 accumulators). Several: 4 x rows by 2 W rows (8). Rows of
  // x are the inner loop, so a tile's packed weights come from L1 after the first x rows.
  constexpr int kSingleRowTile = 4;
  constexpr int kMultiRowTile = 2;
  const int n_tile = rows == 1 ? kSingleRowTile : kMultiRowTile;
  int64_t n = n_begin;
  for (; n + n_tile <= n_end; n += n_tile) {
    if (rows == 1) {
      Tile<1, kSingleRowTile>(x, w, 0, n, y);
      continue;
    }
    int64_t m = 0;
    for (; m + 4 <= rows; m += 4) Tile<4, kMultiRowTile>(x, w, m, n, y);
    switch (rows - m) {
      case 3:
        Tile<3, kMultiRowTile>(x, w, m, n, y);
        break;
      case 2:
        Tile<2, kMultiRowTile>(x, w, m, n, y);
        break;
      case 1:
        Tile<1, kMultiRowTile>(x, w, m, n, y);
        break;
    }
  }
  for (; n < n_end; ++n) {
    int64_t m = 0;
    for (; m + 4 <= rows; m += 4) Tile<4, 1>(x, w, m, n, y);
    for (; m < rows; ++m) Tile<1, 1>(x, w, m, n, y);
  }
}

}  // namespace specd::kernels::cpu::internal
