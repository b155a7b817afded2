#include "kernels/cpu/w4a8_gemm.h"

// GCC 12 flags the `_mm512_undefined_*` inside its own AVX-512 intrinsics as uninitialized when
// they are inlined into target("avx512f") functions (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/row_tiles.h"

#define SPECD_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni,fma")))

namespace specd::kernels::cpu {
namespace {

// x rounded to int8 per row and block of 32 columns: x ≈ scale · q.
struct QuantizedRows {
  std::vector<int8_t> q;      // [rows, cols]
  std::vector<float> scales;  // [rows, cols / 32]
  std::vector<float> sums;    // [rows, groups]: Σ over the group's blocks of scale · Σ q
};

void Quantize(const float* x, int64_t rows, int64_t cols, int64_t group_size, QuantizedRows& out) {
  const int64_t blocks = cols / kW4A8ActivationBlock;
  const int64_t groups = cols / group_size;
  out.q.resize(rows * cols);
  out.scales.resize(rows * blocks);
  out.sums.assign(rows * groups, 0.0f);
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* in = x + m * cols + b * kW4A8ActivationBlock;
      int8_t* q = out.q.data() + m * cols + b * kW4A8ActivationBlock;
      float amax = 0;
      for (int64_t k = 0; k < kW4A8ActivationBlock; ++k) amax = std::max(amax, std::fabs(in[k]));
      const float scale = amax / 127.0f;
      const float inverse = scale == 0 ? 0.0f : 1.0f / scale;
      int32_t sum = 0;
      for (int64_t k = 0; k < kW4A8ActivationBlock; ++k) {
        q[k] = static_cast<int8_t>(std::clamp(std::nearbyint(in[k] * inverse), -127.0f, 127.0f));
        sum += q[k];
      }
      out.scales[m * blocks + b] = scale;
      out.sums[m * groups + b * kW4A8ActivationBlock / group_size] +=
          scale * static_cast<float>(sum);
    }
  }
}

struct VnniBody {
  const QuantizedRows& x;
  const Int4VnniMatrix& w;
  float* y;

  // y[m0 + i, 16 (b0 + j) …] for i < kM, j < kN: kM x rows by kN blocks of 16 W rows.
  template <int kM, int kN>
  SPECD_VNNI void Tile(int64_t m0, int64_t b0);
};

template <int kM, int kN>
SPECD_VNNI void VnniBody::Tile(int64_t m0, int64_t b0) {
  const int64_t groups = w.cols / w.group_size;
  const int64_t chunks = w.cols / 8;  // 64-byte chunks per block
  const int64_t blocks_per_row = w.cols / kW4A8ActivationBlock;
  const __m512i low_nibbles = _mm512_set1_epi8(0x0f);
  __m512 acc[kM][kN];
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t g = 0; g < groups; ++g) {
    __m512 scale[kN], offset[kN];
    for (int j = 0; j < kN; ++j) {
      const int64_t at = ((b0 + j) * groups + g) * kW4A8RowBlock;
      scale[j] = _mm512_loadu_ps(w.scales.data() + at);
      offset[j] = _mm512_loadu_ps(w.offsets.data() + at);
    }
    for (int64_t k0 = g * w.group_size; k0 < (g + 1) * w.group_size; k0 += kW4A8ActivationBlock) {
      __m512i dot[kM][kN];
      for (int i = 0; i < kM; ++i) {
        for (int j = 0; j < kN; ++j) dot[i][j] = _mm512_setzero_si512();
      }
      for (int64_t k = k0; k < k0 + kW4A8ActivationBlock; k += 8) {
        __m512i low[kN], high[kN];
        for (int j = 0; j < kN; ++j) {
          const __m512i packed =
              _mm512_loadu_si512(w.nibbles.data() + ((b0 + j) * chunks + k / 8) * 64);
          low[j] = _mm512_and_si512(packed, low_nibbles);
          high[j] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low_nibbles);
        }
        for (int i = 0; i < kM; ++i) {
          int32_t first, second;
          std::memcpy(&first, x.q.data() + (m0 + i) * w.cols + k, 4);
          std::memcpy(&second, x.q.data() + (m0 + i) * w.cols + k + 4, 4);
          const __m512i xs_low = _mm512_set1_epi32(first);
          const __m512i xs_high = _mm512_set1_epi32(second);
          for (int j = 0; j < kN; ++j) {
            dot[i][j] = _mm512_dpbusd_epi32(dot[i][j], low[j], xs_low);
            dot[i][j] = _mm512_dpbusd_epi32(dot[i][j], high[j], xs_high);
          }
        }
      }
      for (int i = 0; i < kM; ++i) {
        const __m512 x_scale =
            _mm512_set1_ps(x.scales[(m0 + i) * blocks_per_row + k0 / kW4A8ActivationBlock]);
        for (int j = 0; j < kN; ++j) {
          acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[i][j]),
                                      _mm512_mul_ps(scale[j], x_scale), acc[i][j]);
        }
      }
    }
    // The (8 + zero) · s part of every weight, against the group's activations.
    for (int i = 0; i < kM; ++i) {
      const __m512 x_sum = _mm512_set1_ps(x.sums[(m0 + i) * groups + g]);
      for (int j = 0; j < kN; ++j) acc[i][j] = _mm512_fnmadd_ps(offset[j], x_sum, acc[i][j]);
    }
  }
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) {
      const int64_t n = (b0 + j) * kW4A8RowBlock;
      const int64_t valid = std::min<int64_t>(kW4A8RowBlock, w.rows - n);
      const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
      _mm512_mask_storeu_ps(y + (m0 + i) * w.rows + n, mask, acc[i][j]);
    }
  }
}

// Row blocks [begin, end): one x row takes four blocks at a time, enough independent chains to
// cover the instruction's latency; several take two (8 accumulators of each kind).
SPECD_VNNI void RowBlocks(const QuantizedRows& x, int64_t rows, const Int4VnniMatrix& w,
                          int64_t begin, int64_t end, float* y) {
  VnniBody body{x, w, y};
  int64_t b = begin;
  if (rows == 1) {
    for (; b + 4 <= end; b += 4) internal::ForEachRowTile<4>(rows, b, body);
  }
  for (; b + 2 <= end; b += 2) internal::ForEachRowTile<2>(rows, b, body);
  for (; b < end; ++b) internal::ForEachRowTile<1>(rows, b, body);
}

}  // namespace

bool CpuHasW4A8() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma");
}

Int4VnniMatrix RepackForW4A8(const Int4Matrix& w) {
  Int4VnniMatrix out;
  out.rows = w.rows;
  out.cols = w.cols;
  out.group_size = w.group_size;
  const int64_t blocks = (w.rows + kW4A8RowBlock - 1) / kW4A8RowBlock;
  const int64_t chunks = w.cols / 8;
  const int64_t groups = w.cols / w.group_size;
  out.nibbles.assign(blocks * chunks * 64, 0);
  out.scales.assign(blocks * groups * kW4A8RowBlock, 0.0f);
  out.offsets.assign(blocks * groups * kW4A8RowBlock, 0.0f);
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t r = 0; r < kW4A8RowBlock; ++r) {
      const int64_t n = b * kW4A8RowBlock + r;
      if (n >= w.rows) continue;  // padding rows stay zero
      for (int64_t chunk = 0; chunk < chunks; ++chunk) {
        // A packed word holds columns 8·chunk + i at bits 4i; byte c takes columns c and 4 + c.
        const auto word = static_cast<uint32_t>(w.packed[n * chunks + chunk]);
        for (int64_t c = 0; c < 4; ++c) {
          out.nibbles[(b * chunks + chunk) * 64 + 4 * r + c] =
              static_cast<uint8_t>(((word >> (4 * c)) & 0xf) | ((word >> (4 * c + 16)) & 0xf) << 4);
        }
      }
      for (int64_t g = 0; g < groups; ++g) {
        const float scale = w.scales[n * groups + g];
        const float zero = w.zero_points == nullptr ? 0.0f : w.zero_points[n * groups + g];
        out.scales[(b * groups + g) * kW4A8RowBlock + r] = scale;
        out.offsets[(b * groups + g) * kW4A8RowBlock + r] = scale * (8.0f + zero);
      }
    }
  }
  return out;
}

void W4A8Gemm(const float* x, int64_t rows, const Int4VnniMatrix& w, float* y, ThreadPool& pool) {
  thread_local QuantizedRows quantized;
  Quantize(x, rows, w.cols, w.group_size, quantized);
  const QuantizedRows& xq = quantized;
  const int64_t blocks = (w.rows + kW4A8RowBlock - 1) / kW4A8RowBlock;
  pool.ParallelFor(blocks, 4,
                   [&](int64_t begin, int64_t end) { RowBlocks(xq, rows, w, begin, end, y); });
}

}  // namespace specd::kernels::cpu
