
// AVX-512 VNNI body of VnniGemm: one instruction multiplies 64 code × activation byte pairs into
// 16 rows' sums.
//
// A tile is kM x rows by kN blocks of 16 W rows. What bounds it is the two vector ports (shared
// by the dot products, the nibble unpacking and each activation block's float epilogue) and the
// dot product's latency (5 cycles at 2 per cycle: 10 independent sums in flight). So several x
// rows take a tall tile, up to 16 against one block: a chunk of codes is unpacked once for 16
// rows, and 16 sums are in flight (their float accumulators spill to L1, touched once a block).
// Measured on 2560 × 9216 at 16 rows: 0.86× the time of 4 × 2 tiles, 0.71× with 8-bit codes. One
// x row (decode) is bound by memory instead, and takes four blocks at a time.

// GCC 12 flags the `_mm512_undefined_*` inside its own AVX-512 intrinsics as uninitialized when
// they are inlined into target("avx512f") functions (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/row_tiles.h"
#include "kernels/cpu/vnni_gemm_internal.h"

#define SPECD_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni,fma,f16c")))

namespace specd::kernels::cpu::internal {
namespace {

// How far ahead of a chunk its block's codes are fetched: the hardware prefetcher alone leaves a
// tall tile waiting on memory (measured at 16 rows: 0.8× the time with this, 1 row unchanged).
constexpr int64_t kPrefetchAhead = 4096;

// Codes of kBits (4 or 8) bits.
template <int kBits>
struct VnniBody {
  // 64-byte chunks of a block's codes per 32 columns: 4 of 8 columns, or 8 of 4.
  static constexpr int kChunks = kBits;

  const QuantizedRows& x;
  const VnniMatrix& w;
  float* y;

  // y[m0 + i, 16 (b0 + j) …] for i < kM, j < kN.
  template <int kM, int kN>
  SPECD_VNNI void Tile(int64_t m0, int64_t b0) const;
};

template <int kBits>
template <int kM, int kN>
SPECD_VNNI void VnniBody<kBits>::Tile(int64_t m0, int64_t b0) const {
  // Fewer than 8 sums: each sums in two chains (alternate halves of a chunk's columns).
  constexpr int kChains = kM * kN < 8 ? 2 : 1;
  const int64_t cols = w.cols;
  const int64_t groups = cols / w.group_size;
  const int64_t x_block = w.activation_block();
  const int64_t blocks_per_group = w.group_size / x_block;
  const int64_t x_blocks = cols / x_block;
  const uint8_t* codes[kN];
  for (int j = 0; j < kN; ++j) codes[j] = w.codes.data() + (b0 + j) * cols / 32 * kChunks * 64;
  const int8_t* xq = x.q.data() + m0 * cols;
  const float* x_scales = x.scales.data() + m0 * x_blocks;
  const __m512i low_nibbles = _mm512_set1_epi8(0x0f);

  __m512 acc[kM][kN];
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t g = 0; g < groups; ++g) {
    __m512 scale[kN];
    for (int j = 0; j < kN; ++j) {
      scale[j] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(
          w.scales.data() + ((b0 + j) * groups + g) * kVnniRowBlock)));
    }
    for (int64_t block = g * blocks_per_group; block < (g + 1) * blocks_per_group; ++block) {
      __m512i dot[kChains][kM][kN];
      for (int h = 0; h < kChains; ++h) {
        for (int i = 0; i < kM; ++i) {
          for (int j = 0; j < kN; ++j) dot[h][i][j] = _mm512_setzero_si512();
        }
      }
      for (int64_t k32 = block * x_block; k32 < (block + 1) * x_block; k32 += 32) {
#pragma GCC unroll 8
        for (int c = 0; c < kChunks; ++c) {
          // Chunk c's codes as bytes, columns k … k + 3 in `first` and (4 bits) k + 4 … in
          // `second`.
          __m512i first[kN], second[kN];
          for (int j = 0; j < kN; ++j) {
            const uint8_t* chunk = codes[j] + (k32 / 32 * kChunks + c) * 64;
            _mm_prefetch(reinterpret_cast<const char*>(chunk) + kPrefetchAhead, _MM_HINT_T0);
            const __m512i packed = _mm512_loadu_si512(chunk);
            if constexpr (kBits == 4) {
              first[j] = _mm512_and_si512(packed, low_nibbles);
              second[j] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low_nibbles);
            } else {
              first[j] = packed;
            }
          }
          const int64_t k = k32 + c * (32 / kBits);
          for (int i = 0; i < kM; ++i) {
            int32_t four;
            std::memcpy(&four, xq + i * cols + k, 4);
            const __m512i x_first = _mm512_set1_epi32(four);
            const int h = kBits == 8 ? c % kChains : 0;
            for (int j = 0; j < kN; ++j)
              dot[h][i][j] = _mm512_dpbusd_epi32(dot[h][i][j], first[j], x_first);
            if constexpr (kBits == 4) {
              std::memcpy(&four, xq + i * cols + k + 4, 4);
              const __m512i x_second = _mm512_set1_epi32(four);
              for (int j = 0; j < kN; ++j) {
                dot[kChains - 1][i][j] =
                    _mm512_dpbusd_epi32(dot[kChains - 1][i][j], second[j], x_second);
              }
            }
          }
        }
      }
      for (int i = 0; i < kM; ++i) {
        const __m512 x_scale = _mm512_set1_ps(x_scales[i * x_blocks + block]);
        for (int j = 0; j < kN; ++j) {
          const __m512i sum =
              kChains == 2 ? _mm512_add_epi32(dot[0][i][j], dot[1][i][j]) : dot[0][i][j];
          acc[i][j] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(scale[j], x_scale), acc[i][j]);
        }
      }
    }
    // The zero code's part of every weight, z · s, against the group's activations.
    __m512 offset[kN];
    for (int j = 0; j < kN; ++j) {
      const __m512 zero =
          w.zero_codes.empty()
              ? _mm512_set1_ps(static_cast<float>(w.midpoint()))
              : _mm512_cvtepi32_ps(
                    _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
                        w.zero_codes.data() + ((b0 + j) * groups + g) * kVnniRowBlock))));
      offset[j] = _mm512_mul_ps(zero, scale[j]);
    }
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

template <int kBits>
void VnniRowBlocksAvx512(const QuantizedRows& x, int64_t rows, const VnniMatrix& w, int64_t begin,
                         int64_t end, float* y) {
  ForEachBlockTile(VnniBody<kBits>{x, w, y}, rows, begin, end);
}

template void VnniRowBlocksAvx512<4>(const QuantizedRows&, int64_t, const VnniMatrix&, int64_t,
                                     int64_t, float*);
template void VnniRowBlocksAvx512<8>(const QuantizedRows&, int64_t, const VnniMatrix&, int64_t,
                                     int64_t, float*);

}  // namespace specd::kernels::cpu::internal
