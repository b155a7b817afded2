// AVX-512 body of DenseGemm: a tile's 16 accumulators of 16 lanes stay in registers, each bf16
// weight is widened once (a zero-extend and a shift) and serves every x row of the tile.

// GCC 12 flags the `_mm512_undefined_*` inside its own AVX-512 intrinsics as uninitialized when
// they are inlined into target("avx512f") functions (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/cpu/dense_gemm_internal.h"

#define SPECD_AVX512 __attribute__((target("avx512f,fma")))

namespace specd::kernels::cpu::internal {
namespace {

template <bool kBf16>
struct Avx512Body {
  const float* x;
  const DenseMatrix& w;
  float* y;

  // Sixteen weights of column k on, as float32.
  SPECD_AVX512 static __m512 Load(const char* row, int64_t k) {
    if constexpr (kBf16) {
      const auto* halves = reinterpret_cast<const __m256i*>(row + 2 * k);
      return _mm512_castsi512_ps(
          _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(halves)), 16));
    } else {
      return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + k);
    }
  }

  // y[m0 + i, n0 + j] for i < kM, j < kN.
  template <int kM, int kN>
  SPECD_AVX512 void Tile(int64_t m0, int64_t n0) {
    const int64_t row_bytes = w.cols * (kBf16 ? 2 : 4);
    const int64_t vector_cols = w.cols / 16 * 16;
    const char* rows[kN];
    for (int j = 0; j < kN; ++j) rows[j] = static_cast<const char*>(w.data) + (n0 + j) * row_bytes;
    __m512 acc[kM][kN];
    for (int i = 0; i < kM; ++i) {
      for (int j = 0; j < kN; ++j) acc[i][j] = _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < vector_cols; k += 16) {
      __m512 weights[kN];
      for (int j = 0; j < kN; ++j) weights[j] = Load(rows[j], k);
      for (int i = 0; i < kM; ++i) {
        const __m512 xs = _mm512_loadu_ps(x + (m0 + i) * w.cols + k);
        for (int j = 0; j < kN; ++j) acc[i][j] = _mm512_fmadd_ps(xs, weights[j], acc[i][j]);
      }
    }
    for (int i = 0; i < kM; ++i) {
      for (int j = 0; j < kN; ++j) {
        float total = _mm512_reduce_add_ps(acc[i][j]);
        for (int64_t k = vector_cols; k < w.cols; ++k) {
          total += x[(m0 + i) * w.cols + k] * WeightAt<kBf16>(rows[j], k);
        }
        y[(m0 + i) * w.rows + n0 + j] = total;
      }
    }
  }
};

template <bool kBf16>
SPECD_AVX512 void Rows(const float* x, int64_t m, const DenseMatrix& w, int64_t n_begin,
                       int64_t n_end, float* y) {
  Avx512Body<kBf16> body{x, w, y};
  ForEachTile(m, n_begin, n_end, body);
}

}  // namespace

SPECD_AVX512 void DenseGemmAvx512(const float* x, int64_t m, const DenseMatrix& w, int64_t n_begin,
                                  int64_t n_end, float* y) {
  (w.bf16 ? Rows<true> : Rows<false>)(x, m, w, n_begin, n_end, y);
}

}  // namespace specd::kernels::cpu::internal
