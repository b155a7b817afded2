// AVX-512 VNNI body of VnniGemm: one instruction multiplies 64 code × activation byte pairs into
// 16 rows' sums.

// GCC 12 flags the `_mm512_undefined_*` inside its own AVX-512 intrinsics as uninitialized when
// they are inlined into target("avx512f") functions (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/row_tiles.h"
#include "kernels/cpu/vnni_gemm_internal.h"

#define SPECD_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni,fma")))

namespace specd::kernels::cpu::internal {
namespace {

// Codes of kBits (4 or 8) bits.
template <int kBits>
struct VnniBody {
  const QuantizedRows& x;
  const VnniMatrix& w;
  float* y;

  // y[m0 + i, 16 (b0 + j) …] for i < kM, j < kN: kM x rows by kN blocks of 16 W rows.
  template <int kM, int kN>
  SPECD_VNNI void Tile(int64_t m0, int64_t b0);

  // A block's codes of columns k … k + 3 (`first`) and k + 4 … k + 7 (`second`), a byte each.
  SPECD_VNNI static void Load8Columns(const uint8_t* block_codes, int64_t k, __m512i& first,
                                      __m512i& second) {
    if constexpr (kBits == 4) {
      const __m512i low_nibbles = _mm512_set1_epi8(0x0f);
      const __m512i packed = _mm512_loadu_si512(block_codes + k / 8 * 64);
      first = _mm512_and_si512(packed, low_nibbles);
      second = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low_nibbles);
    } else {
      first = _mm512_loadu_si512(block_codes + k / 4 * 64);
      second = _mm512_loadu_si512(block_codes + k / 4 * 64 + 64);
    }
  }
};

template <int kBits>
template <int kM, int kN>
SPECD_VNNI void VnniBody<kBits>::Tile(int64_t m0, int64_t b0) {
  const int64_t groups = w.cols / w.group_size;
  const int64_t block_bytes = w.cols * kBits / 32 * 64;
  const int64_t blocks_per_row = w.cols / kVnniActivationBlock;
  __m512 acc[kM][kN];
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t g = 0; g < groups; ++g) {
    __m512 scale[kN], offset[kN];
    for (int j = 0; j < kN; ++j) {
      const int64_t at = ((b0 + j) * groups + g) * kVnniRowBlock;
      scale[j] = _mm512_loadu_ps(w.scales.data() + at);
      offset[j] = _mm512_loadu_ps(w.offsets.data() + at);
    }
    for (int64_t k0 = g * w.group_size; k0 < (g + 1) * w.group_size; k0 += kVnniActivationBlock) {
      // One x row (decode) is bound by the latency of its dot products, not their throughput:
      // there, columns k + 4 … k + 7 sum in chains of their own, twice the products in flight.
      constexpr int kHigh = kM == 1 ? 1 : 0;
      __m512i dot[2][kM][kN];
      for (int i = 0; i < kM; ++i) {
        for (int j = 0; j < kN; ++j) dot[0][i][j] = dot[1][i][j] = _mm512_setzero_si512();
      }
      for (int64_t k = k0; k < k0 + kVnniActivationBlock; k += 8) {
        __m512i low[kN], high[kN];
        for (int j = 0; j < kN; ++j) {
          Load8Columns(w.codes.data() + (b0 + j) * block_bytes, k, low[j], high[j]);
        }
        for (int i = 0; i < kM; ++i) {
          int32_t first, second;
          std::memcpy(&first, x.q.data() + (m0 + i) * w.cols + k, 4);
          std::memcpy(&second, x.q.data() + (m0 + i) * w.cols + k + 4, 4);
          const __m512i xs_low = _mm512_set1_epi32(first);
          const __m512i xs_high = _mm512_set1_epi32(second);
          for (int j = 0; j < kN; ++j) {
            dot[0][i][j] = _mm512_dpbusd_epi32(dot[0][i][j], low[j], xs_low);
            dot[kHigh][i][j] = _mm512_dpbusd_epi32(dot[kHigh][i][j], high[j], xs_high);
          }
        }
      }
      for (int i = 0; i < kM; ++i) {
        const __m512 x_scale =
            _mm512_set1_ps(x.scales[(m0 + i) * blocks_per_row + k0 / kVnniActivationBlock]);
        for (int j = 0; j < kN; ++j) {
          const __m512i sum =
              kHigh == 1 ? _mm512_add_epi32(dot[0][i][j], dot[1][i][j]) : dot[0][i][j];
          acc[i][j] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(scale[j], x_scale), acc[i][j]);
        }
      }
    }
    // The offset part of every weight, against the group's activations.
    for (int i = 0; i < kM; ++i) {
      const __m512 x_sum = _mm512_set1_ps(x.sums[(m0 + i) * groups + g]);
      for (int j = 0; j < kN; ++j) acc[i][j] = _mm512_fnmadd_ps(offset[j], x_sum, acc[i][j]);
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

// Row blocks [begin, end): one x row takes four blocks at a time, enough independent chains to
// cover the instruction's latency; several take two (8 accumulators of each kind).
template <int kBits>
SPECD_VNNI void VnniRowBlocksAvx512(const QuantizedRows& x, int64_t rows, const VnniMatrix& w,
                                    int64_t begin, int64_t end, float* y) {
  VnniBody<kBits> body{x, w, y};
  int64_t b = begin;
  if (rows == 1) {
    for (; b + 4 <= end; b += 4) internal::ForEachRowTile<4>(rows, b, body);
  }
  for (; b + 2 <= end; b += 2) internal::ForEachRowTile<2>(rows, b, body);
  for (; b < end; ++b) internal::ForEachRowTile<1>(rows, b, body);
}

template void VnniRowBlocksAvx512<4>(const QuantizedRows&, int64_t, const VnniMatrix&, int64_t,
                                     int64_t, float*);
template void VnniRowBlocksAvx512<8>(const QuantizedRows&, int64_t, const VnniMatrix&, int64_t,
                                     int64_t, float*);

}  // namespace specd::kernels::cpu::internal
