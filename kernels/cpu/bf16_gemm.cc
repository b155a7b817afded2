// A 64-byte chunk of the VNNI layout holds 16 rows × 8 columns; its 16-bit word 2r + h holds row
// r's columns 2h, 4 + 2h, 1 + 2h and 5 + 2h in its four nibbles. Four shift-and-mask steps take
// one nibble of every word into a vector of 32 bf16 weights whose 32-bit lane r pairs two of row
// r's columns, (0, 2), (4, 6), (1, 3) or (5, 7), so that x, stored in that order per 8 columns,
// meets them as one broadcast 32-bit pair each: 16 rows advance with no horizontal sum.
//
// Tiles as the VNNI body's (row_tiles.h, ForEachBlockTile).

// GCC 12 flags the `_mm512_undefined_*` inside its own AVX-512 intrinsics as uninitialized when
// they are inlined into target("avx512f") functions (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/cpu/bf16_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/row_tiles.h"

#define SPECD_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma,f16c")))

namespace specd::kernels::cpu {
namespace {

// 0x4300 | c is the bf16 of 128 + c.
constexpr float kBias = 128.0f;
constexpr int16_t kBiasBits = 0x4300;

// How far ahead of a chunk its block's codes are fetched (as in the VNNI body).
constexpr int64_t kPrefetchAhead = 4096;

// x rounded to bf16, each 8 columns in the order 0 2 4 6 1 3 5 7, and its sums per group.
struct Bf16Rows {
  std::vector<uint16_t> x;  // [rows, cols]
  std::vector<float> sums;  // [rows, groups]: Σ of the rounded x over the group's columns
};

SPECD_BF16 void RoundRows(const float* x, int64_t cols, int64_t group_size, int64_t begin,
                          int64_t end, Bf16Rows& out) {
  const __m128i pair_order = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  const int64_t groups = cols / group_size;
  for (int64_t m = begin; m < end; ++m) {
    for (int64_t g = 0; g < groups; ++g) {
      __m256 sum = _mm256_setzero_ps();
      for (int64_t k = g * group_size; k < (g + 1) * group_size; k += 8) {
        const __m128i bits =
            reinterpret_cast<__m128i>(_mm256_cvtneps_pbh(_mm256_loadu_ps(x + m * cols + k)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out.x.data() + m * cols + k),
                         _mm_shuffle_epi8(bits, pair_order));
        sum = _mm256_add_ps(
            sum, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16)));
      }
      __m128 half = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
      half = _mm_add_ps(half, _mm_movehl_ps(half, half));
      half = _mm_add_ss(half, _mm_movehdup_ps(half));
      out.sums[m * groups + g] = _mm_cvtss_f32(half);
    }
  }
}

struct Bf16Body {
  const Bf16Rows& x;
  const VnniMatrix& w;
  float* y;

  // y[m0 + i, 16 (b0 + j) …] for i < kM, j < kN.
  template <int kM, int kN>
  SPECD_BF16 void Tile(int64_t m0, int64_t b0) const;
};

// The 32-bit pair of x at `at` in every lane, as a dot product's operand.
SPECD_BF16 inline __m512bh Pair(const uint16_t* at) {
  int32_t pair;
  std::memcpy(&pair, at, sizeof(pair));
  return reinterpret_cast<__m512bh>(_mm512_set1_epi32(pair));
}

template <int kM, int kN>
SPECD_BF16 void Bf16Body::Tile(int64_t m0, int64_t b0) const {
  const int64_t cols = w.cols;
  const int64_t groups = cols / w.group_size;
  const uint8_t* codes[kN];
  for (int j = 0; j < kN; ++j) codes[j] = w.codes.data() + (b0 + j) * cols / 8 * 64;
  const uint16_t* xs = x.x.data() + m0 * cols;
  const __m512i nibble = _mm512_set1_epi16(0x000f);
  const __m512i bias = _mm512_set1_epi16(kBiasBits);
  // (a & b) | c, one vpternlog: a nibble in place, made a bf16.
  constexpr int kAndOr = 0xea;

  __m512 acc[kM][kN];
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t g = 0; g < groups; ++g) {
    // One chain of sums per row and block in every tile shape (unlike the VNNI body's exact
    // integer sums, float ones in two chains would make a row's result depend on its tile: a
    // decode step's on whether it runs alone or in a batch).
    __m512 dot[kM][kN];
    for (int i = 0; i < kM; ++i) {
      for (int j = 0; j < kN; ++j) dot[i][j] = _mm512_setzero_ps();
    }
    for (int64_t k = g * w.group_size; k < (g + 1) * w.group_size; k += 8) {
      __m512bh weights[kN][4];  // lane r: columns (0, 2), (4, 6), (1, 3), (5, 7) of row r
      for (int j = 0; j < kN; ++j) {
        const uint8_t* chunk = codes[j] + k / 8 * 64;
        _mm_prefetch(reinterpret_cast<const char*>(chunk) + kPrefetchAhead, _MM_HINT_T0);
        const __m512i packed = _mm512_loadu_si512(chunk);
        weights[j][0] =
            reinterpret_cast<__m512bh>(_mm512_ternarylogic_epi32(packed, nibble, bias, kAndOr));
        weights[j][1] = reinterpret_cast<__m512bh>(
            _mm512_ternarylogic_epi32(_mm512_srli_epi16(packed, 4), nibble, bias, kAndOr));
        weights[j][2] = reinterpret_cast<__m512bh>(
            _mm512_ternarylogic_epi32(_mm512_srli_epi16(packed, 8), nibble, bias, kAndOr));
        weights[j][3] =
            reinterpret_cast<__m512bh>(_mm512_or_si512(_mm512_srli_epi16(packed, 12), bias));
      }
      for (int i = 0; i < kM; ++i) {
        const uint16_t* pairs = xs + i * cols + k;
        for (int p = 0; p < 4; ++p) {
          const __m512bh x_pair = Pair(pairs + 2 * p);
          for (int j = 0; j < kN; ++j)
            dot[i][j] = _mm512_dpbf16_ps(dot[i][j], weights[j][p], x_pair);
        }
      }
    }
    // Per row: s · (Σ (128 + c) · x − (128 + z) · Σ x).
    __m512 scale[kN], offset[kN];
    for (int j = 0; j < kN; ++j) {
      const int64_t at = ((b0 + j) * groups + g) * kVnniRowBlock;
      scale[j] = _mm512_cvtph_ps(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.scales.data() + at)));
      const __m512 zero = w.zero_codes.empty()
                              ? _mm512_set1_ps(static_cast<float>(w.midpoint()))
                              : _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(
                                    reinterpret_cast<const __m128i*>(w.zero_codes.data() + at))));
      offset[j] = _mm512_add_ps(zero, _mm512_set1_ps(kBias));
    }
    for (int i = 0; i < kM; ++i) {
      const __m512 x_sum = _mm512_set1_ps(x.sums[(m0 + i) * groups + g]);
      for (int j = 0; j < kN; ++j) {
        acc[i][j] =
            _mm512_fmadd_ps(scale[j], _mm512_fnmadd_ps(offset[j], x_sum, dot[i][j]), acc[i][j]);
      }
    }
  }
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) {
      const int64_t n = (b0 + j) * kVnniRowBlock;
      const int64_t valid = std::min<int64_t>(kVnniRowBlock, w.rows - n);
      const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
      _mm512_mask_storeu_ps(y + (m0 + i) * w.rows + n, mask, acc[i][j]);
    }
  }
}

}  // namespace

bool CpuHasBf16Gemm() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16") &&
         __builtin_cpu_supports("f16c");
}

void Bf16Gemm(const float* x, int64_t rows, const VnniMatrix& w, float* y, ThreadPool& pool) {
  // Named through a reference: inside the pool's lambdas a thread_local would be each worker's.
  thread_local Bf16Rows per_thread;
  Bf16Rows& rounded = per_thread;
  rounded.x.resize(rows * w.cols);
  rounded.sums.resize(rows * (w.cols / w.group_size));
  pool.ParallelFor(rows, 1, [&](int64_t begin, int64_t end) {
    RoundRows(x, w.cols, w.group_size, begin, end, rounded);
  });
  const Bf16Body body{rounded, w, y};
  const int64_t blocks = (w.rows + kVnniRowBlock - 1) / kVnniRowBlock;
  pool.ParallelFor(blocks, 4, [&](int64_t begin, int64_t end) {
    internal::ForEachBlockTile(body, rows, begin, end);
  });
}

}  // namespace specd::kernels::cpu
