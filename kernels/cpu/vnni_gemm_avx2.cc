// AVX2 body of VnniGemm, for CPUs without AVX-512 VNNI, on the same layout: a 64-byte chunk is two
// 256-bit halves of 8 rows each, and maddubs (unsigned × signed bytes, adjacent pairs summed to
// 16 bits) then madd by ones (pairs to 32 bits) give each 32-bit lane its row's four products.
//   4-bit codes (0 … 15) × int8 activations: a 16-bit sum of 32 columns is at most
//   8 · 2 · 15 · 127 = 30480, so it stays in 16 bits for 32 columns, then widens.
//   8-bit codes: code − 128 is the signed weight w (an xor of the top bit); maddubs takes |x| and
//   w · sign(x), whose pairs stay within 2 · 127 · 127, so no offset is needed.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/row_tiles.h"
#include "kernels/cpu/vnni_gemm_internal.h"

#define SPECD_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace specd::kernels::cpu::internal {
namespace {

constexpr int64_t kHalfRows = kVnniRowBlock / 2;

template <int kBits>
struct Avx2Body {
  const QuantizedRows& x;
  const VnniMatrix& w;
  float* y;

  // y[m0 + i, 16 (b0 + j) …] for i < kM, j < kN: kM x rows by kN blocks of 16 W rows.
  template <int kM, int kN>
  SPECD_AVX2 void Tile(int64_t m0, int64_t b0);

  // Half h of block b's 16 per-row scales of group g, and of their zero codes as floats.
  SPECD_AVX2 __m256 Scales(int64_t b, int64_t g, int h) const {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales.data() + At(b, g, h))));
  }
  SPECD_AVX2 __m256 ZeroCodes(int64_t b, int64_t g, int h) const {
    if (w.zero_codes.empty()) return _mm256_set1_ps(static_cast<float>(w.midpoint()));
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(w.zero_codes.data() + At(b, g, h)))));
  }
  int64_t At(int64_t b, int64_t g, int h) const {
    return (b * (w.cols / w.group_size) + g) * kVnniRowBlock + h * kHalfRows;
  }

  // Adds to `dot` the 32-bit sums, per x row and half block, of x rows m0 … m0 + kM − 1's 32
  // columns from k0 against kN blocks: each chunk of codes is loaded (and unpacked) once for all
  // the rows.
  template <int kM, int kN>
  SPECD_AVX2 void AddDots(int64_t m0, int64_t k0, int64_t b0, __m256i (&dot)[kM][kN][2]) const {
    const int64_t block_bytes = w.cols * kBits / 32 * 64;
    const int8_t* xq = x.q.data() + m0 * w.cols;
    const __m256i ones = _mm256_set1_epi16(1);
    if constexpr (kBits == 4) {
      const __m256i low_nibbles = _mm256_set1_epi8(0x0f);
      __m256i sum[kM][kN][2];  // 16-bit
      for (int i = 0; i < kM; ++i) {
        for (int j = 0; j < kN; ++j) sum[i][j][0] = sum[i][j][1] = _mm256_setzero_si256();
      }
      for (int64_t k = k0; k < k0 + 32; k += 8) {
        __m256i low[kN][2], high[kN][2];
        for (int j = 0; j < kN; ++j) {
          const uint8_t* chunk = w.codes.data() + (b0 + j) * block_bytes + k / 8 * 64;
          for (int h = 0; h < 2; ++h) {
            const __m256i packed =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 32 * h));
            low[j][h] = _mm256_and_si256(packed, low_nibbles);
            high[j][h] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibbles);
          }
        }
        for (int i = 0; i < kM; ++i) {
          int32_t first, second;
          std::memcpy(&first, xq + i * w.cols + k, 4);
          std::memcpy(&second, xq + i * w.cols + k + 4, 4);
          const __m256i xs_low = _mm256_set1_epi32(first), xs_high = _mm256_set1_epi32(second);
          for (int j = 0; j < kN; ++j) {
            for (int h = 0; h < 2; ++h) {
              sum[i][j][h] = _mm256_add_epi16(
                  sum[i][j][h], _mm256_add_epi16(_mm256_maddubs_epi16(low[j][h], xs_low),
                                                 _mm256_maddubs_epi16(high[j][h], xs_high)));
            }
          }
        }
      }
      for (int i = 0; i < kM; ++i) {
        for (int j = 0; j < kN; ++j) {
          for (int h = 0; h < 2; ++h) {
            dot[i][j][h] = _mm256_add_epi32(dot[i][j][h], _mm256_madd_epi16(sum[i][j][h], ones));
          }
        }
      }
    } else {
      const __m256i top_bit = _mm256_set1_epi8(static_cast<char>(0x80));
      for (int64_t k = k0; k < k0 + 32; k += 4) {
        __m256i weights[kN][2];
        for (int j = 0; j < kN; ++j) {
          const uint8_t* chunk = w.codes.data() + (b0 + j) * block_bytes + k / 4 * 64;
          for (int h = 0; h < 2; ++h) {
            weights[j][h] = _mm256_xor_si256(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 32 * h)), top_bit);
          }
        }
        for (int i = 0; i < kM; ++i) {
          int32_t four;
          std::memcpy(&four, xq + i * w.cols + k, 4);
          const __m256i xs = _mm256_set1_epi32(four);
          const __m256i magnitudes = _mm256_abs_epi8(xs);
          for (int j = 0; j < kN; ++j) {
            for (int h = 0; h < 2; ++h) {
              const __m256i pairs =
                  _mm256_maddubs_epi16(magnitudes, _mm256_sign_epi8(weights[j][h], xs));
              dot[i][j][h] = _mm256_add_epi32(dot[i][j][h], _mm256_madd_epi16(pairs, ones));
            }
          }
        }
      }
    }
  }
};

template <int kBits>
template <int kM, int kN>
SPECD_AVX2 void Avx2Body<kBits>::Tile(int64_t m0, int64_t b0) {
  const int64_t groups = w.cols / w.group_size;
  const int64_t block = w.activation_block();
  const int64_t blocks_per_row = w.cols / block;
  __m256 acc[kM][kN][2];
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) acc[i][j][0] = acc[i][j][1] = _mm256_setzero_ps();
  }
  for (int64_t g = 0; g < groups; ++g) {
    __m256 scale[kN][2];  // widened from half once a group, for every block and row
    for (int j = 0; j < kN; ++j) {
      for (int h = 0; h < 2; ++h) scale[j][h] = Scales(b0 + j, g, h);
    }
    for (int64_t k0 = g * w.group_size; k0 < (g + 1) * w.group_size; k0 += block) {
      __m256i dot[kM][kN][2];
      for (int i = 0; i < kM; ++i) {
        for (int j = 0; j < kN; ++j) dot[i][j][0] = dot[i][j][1] = _mm256_setzero_si256();
      }
      for (int64_t k = k0; k < k0 + block; k += 32) AddDots<kM, kN>(m0, k, b0, dot);
      for (int i = 0; i < kM; ++i) {
        const __m256 x_scale = _mm256_set1_ps(x.scales[(m0 + i) * blocks_per_row + k0 / block]);
        for (int j = 0; j < kN; ++j) {
          for (int h = 0; h < 2; ++h) {
            acc[i][j][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[i][j][h]),
                                           _mm256_mul_ps(scale[j][h], x_scale), acc[i][j][h]);
          }
        }
      }
    }
    if constexpr (kBits == 4) {
      // The zero code's part of every weight, z · s, against the group's activations (8-bit
      // codes were made signed in AddDots).
      __m256 offset[kN][2];
      for (int j = 0; j < kN; ++j) {
        for (int h = 0; h < 2; ++h) {
          offset[j][h] = _mm256_mul_ps(ZeroCodes(b0 + j, g, h), scale[j][h]);
        }
      }
      for (int i = 0; i < kM; ++i) {
        const __m256 x_sum = _mm256_set1_ps(x.sums[(m0 + i) * groups + g]);
        for (int j = 0; j < kN; ++j) {
          for (int h = 0; h < 2; ++h) {
            acc[i][j][h] = _mm256_fnmadd_ps(offset[j][h], x_sum, acc[i][j][h]);
          }
        }
      }
    }
  }
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) {
      for (int h = 0; h < 2; ++h) {
        const int64_t n = (b0 + j) * kVnniRowBlock + h * kHalfRows;
        const int64_t valid = std::min<int64_t>(kHalfRows, w.rows - n);
        if (valid <= 0) continue;
        float* out = y + (m0 + i) * w.rows + n;
        if (valid == kHalfRows) {
          _mm256_storeu_ps(out, acc[i][j][h]);
        } else {
          alignas(32) float lanes[kHalfRows];
          _mm256_store_ps(lanes, acc[i][j][h]);
          std::copy(lanes, lanes + valid, out);
        }
      }
    }
  }
}

}  // namespace

// Row blocks [begin, end): one x row takes two blocks at a time, for more loads in flight.
template <int kBits>
SPECD_AVX2 void VnniRowBlocksAvx2(const QuantizedRows& x, int64_t rows, const VnniMatrix& w,
                                  int64_t begin, int64_t end, float* y) {
  Avx2Body<kBits> body{x, w, y};
  int64_t b = begin;
  if (rows == 1) {
    for (; b + 2 <= end; b += 2) ForEachRowTile<2>(rows, b, body);
  }
  for (; b < end; ++b) ForEachRowTile<1>(rows, b, body);
}

SPECD_AVX2 void QuantizeRowsAvx2(const float* x, int64_t cols, int64_t group_size, int64_t block,
                                 int64_t begin, int64_t end, QuantizedRows& out) {
  const int64_t blocks = cols / block;
  const int64_t groups = cols / group_size;
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 most = _mm256_set1_ps(127.0f), least = _mm256_set1_ps(-127.0f);
  // packs interleave the 128-bit lanes; this puts the 4-byte groups back in column order.
  const __m256i column_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t m = begin; m < end; ++m) {
    std::fill_n(out.sums.data() + m * groups, groups, 0.0f);
    for (int64_t b = 0; b < blocks; ++b) {
      const float* in = x + m * cols + b * block;
      __m256 amax = _mm256_setzero_ps();
      for (int64_t k = 0; k < block; k += 8) {
        amax = _mm256_max_ps(amax, _mm256_and_ps(_mm256_loadu_ps(in + k), magnitude));
      }
      __m128 half = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
      half = _mm_max_ps(half, _mm_movehl_ps(half, half));
      half = _mm_max_ss(half, _mm_movehdup_ps(half));
      const float scale = _mm_cvtss_f32(half) / 127.0f;
      const __m256 inverse = _mm256_set1_ps(scale == 0 ? 0.0f : 1.0f / scale);
      __m256i sum = _mm256_setzero_si256();
      for (int64_t k0 = 0; k0 < block; k0 += 32) {
        __m256i q[4];
        for (int i = 0; i < 4; ++i) {
          const __m256 rounded =
              _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(in + k0 + 8 * i), inverse),
                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
          q[i] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(rounded, least), most));
          sum = _mm256_add_epi32(sum, q[i]);
        }
        const __m256i bytes =
            _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.q.data() + m * cols + b * block + k0),
                            _mm256_permutevar8x32_epi32(bytes, column_order));
      }
      __m128i total = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
      total = _mm_add_epi32(total, _mm_shuffle_epi32(total, 0x4e));
      total = _mm_add_epi32(total, _mm_shuffle_epi32(total, 0xb1));
      out.scales[m * blocks + b] = scale;
      out.sums[m * groups + b * block / group_size] +=
          scale * static_cast<float>(_mm_cvtsi128_si32(total));
    }
  }
}

template void VnniRowBlocksAvx2<4>(const QuantizedRows&, int64_t, const VnniMatrix&, int64_t,
                                   int64_t, float*);
template void VnniRowBlocksAvx2<8>(const QuantizedRows&, int64_t, const VnniMatrix&, int64_t,
                                   int64_t, float*);

}  // namespace specd::kernels::cpu::internal
