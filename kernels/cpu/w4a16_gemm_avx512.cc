// AVX-512 body: 16 lanes, two packed words at a time, dequantized by table lookup. Per group and
// W row, a register holds the 16 values a nibble can stand for; a weight is then one variable
// shift and one vpermps, against shift, mask, convert and fma in the AVX2 body; on two cores the
// M = 1 loop is otherwise limited by instructions rather than by memory.
//
// A 64-bit broadcast puts word 2p in the even lanes and word 2p + 1 in the odd ones; lane i
// shifts by 4·(i / 2), so it holds column 8·(i % 2) + i / 2 of its 16. Rather than shuffle the
// weights, each call reorders x once to match (a cost of K per x row against N·K per call).
//
// Many x rows (prefill chunks, batches of verify blocks) make the product bound by the FMA ports,
// and the lookups (a third of the tile's vector ops) are what it does besides. From 32 rows each
// weight is looked up once per block of x rows instead, 4 W rows at a time into a panel that the
// tiles then read. The same tile either way — the same sums in the same order — so a row's result
// never depends on how many rows share the call: a verify block's rows are its decode steps', a
// batch's rows each sequence's alone, bit for bit.

// GCC 12 flags the `_mm512_undefined_*` inside its own AVX-512 intrinsics as uninitialized when
// they are inlined into target("avx512f") functions (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/w4a16_gemm_internal.h"

#define SPECD_AVX512 __attribute__((target("avx512f,fma")))

namespace specd::kernels::cpu::internal {
namespace {

// Floats from one row of x (interleaved) or of a panel to the next: 64 bytes past the row, so
// that the rows a tile reads in step fall in different L1 sets (at K = 4096 or 9216 unpadded
// rows are a multiple of 4 KiB apart, and the eight streams of a tile then share one set).
int64_t PaddedStride(int64_t cols) { return cols + 16; }

// x in the lane order above, for every 16 columns of every row, rows `stride` floats apart.
SPECD_AVX512 void InterleaveColumns(const float* x, int64_t rows, int64_t cols, int64_t stride,
                                    float* out) {
  const __m512i lane_columns =
      _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < cols; k += 16) {
      _mm512_storeu_ps(out + r * stride + k,
                       _mm512_permutexvar_ps(lane_columns, _mm512_loadu_ps(x + r * cols + k)));
    }
  }
}

// The 16 weights a nibble can stand for in group g of W row n, (nibble - 8 - zero) · scale, exact
// up to the one rounding of the product, as in the reference.
SPECD_AVX512 __m512 NibbleValues(const Int4Matrix& w, int64_t n, int64_t g) {
  const __m512 nibbles = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const int64_t at = n * (w.cols / w.group_size) + g;
  const float zero = w.zero_points == nullptr ? 0.0f : w.zero_points[at];
  return _mm512_mul_ps(_mm512_sub_ps(nibbles, _mm512_set1_ps(8.0f + zero)),
                       _mm512_set1_ps(w.scales[at]));
}

// The 16 weights of W row n0 + j at packed words [word, word + 2), in x's interleaved lane order,
// looked up in the row's table for the group as a tile goes.
template <int kN>
struct LookedUpWeights {
  const Int4Matrix& w;
  int64_t n0;
  __m512 values[kN];

  SPECD_AVX512 void StartGroup(int64_t g) {
    for (int j = 0; j < kN; ++j) values[j] = NibbleValues(w, n0 + j, g);
  }
  SPECD_AVX512 __m512 At(int j, int64_t word) const {
    const int64_t words_per_row = w.cols / 8;
    const int32_t* words = w.packed + (n0 + j) * words_per_row + word;
    PrefetchAhead(words, kN * words_per_row * sizeof(int32_t));
    int64_t pair;
    std::memcpy(&pair, words, sizeof(pair));
    // vpermps reads only the low 4 bits of each index lane, so no mask is needed.
    const __m512i nibble_shifts =
        _mm512_setr_epi32(0, 0, 4, 4, 8, 8, 12, 12, 16, 16, 20, 20, 24, 24, 28, 28);
    return _mm512_permutexvar_ps(_mm512_srlv_epi32(_mm512_set1_epi64(pair), nibble_shifts),
                                 values[j]);
  }
};

// The same weights read from a panel that LookedUpWeights filled beforehand, rows `stride` apart.
struct PanelWeights {
  const float* panel;
  int64_t stride;

  void StartGroup(int64_t) {}
  SPECD_AVX512 __m512 At(int j, int64_t word) const {
    return _mm512_loadu_ps(panel + j * stride + word * 8);
  }
};

// x rows in the interleaved lane order, `stride` floats apart.
struct InterleavedRows {
  const float* data;
  int64_t stride;
};

// y[m0 + i, n0 + j] for i < kM, j < kN, from x in interleaved lane order: per output, 16 lanes
// summed over the columns in order, then across. Whichever weights it reads, the sums and their
// order are the same, so a row's result does not depend on the rows that came with it.
// Inlined into its callers, so that the weights' tables stay in registers.
template <int kM, int kN, typename Weights>
SPECD_AVX512 __attribute__((always_inline)) inline void Tile(InterleavedRows x, const Int4Matrix& w,
                                                             Weights& weights, int64_t m0,
                                                             int64_t n0, float* y) {
  const int64_t groups = w.cols / w.group_size;
  const int64_t words_per_group = w.group_size / 8;
  __m512 acc[kM][kN];
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t g = 0; g < groups; ++g) {
    weights.StartGroup(g);
    for (int64_t word = g * words_per_group; word < (g + 1) * words_per_group; word += 2) {
      __m512 weight[kN];
      for (int j = 0; j < kN; ++j) weight[j] = weights.At(j, word);
      for (int i = 0; i < kM; ++i) {
        const __m512 xs = _mm512_loadu_ps(x.data + (m0 + i) * x.stride + word * 8);
        for (int j = 0; j < kN; ++j) acc[i][j] = _mm512_fmadd_ps(xs, weight[j], acc[i][j]);
      }
    }
  }
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) y[(m0 + i) * w.rows + n0 + j] = _mm512_reduce_add_ps(acc[i][j]);
  }
}

// The tile with its weights looked up as it goes.
template <int kM, int kN>
SPECD_AVX512 void LookUpTile(InterleavedRows x, const Int4Matrix& w, int64_t m0, int64_t n0,
                             float* y) {
  LookedUpWeights<kN> weights{.w = w, .n0 = n0, .values = {}};
  Tile<kM, kN>(x, w, weights, m0, n0, y);
}

// x rows from which dequantizing each weight once per block of x rows, into a panel, pays: at
// 16 the lookups cost less than the panel's stores and loads.
constexpr int64_t kPanelMinRows = 32;
// x rows per tile and W rows per panel: 16 accumulators.
constexpr int kTile = 4;
// x rows per block: their interleaved copy fills half the L2 (at least kPanelMinRows rows), so
// it stays there while every panel of the call's W rows meets it.
constexpr int64_t kBlockFloats = (512 << 10) / sizeof(float);

// W rows [n0, n0 + kN) against the `count` x rows of `block`: their weights dequantized into
// `panel` once, then read by every tile of x rows.
template <int kN>
SPECD_AVX512 void PanelRows(InterleavedRows block, int64_t count, const Int4Matrix& w, int64_t n0,
                            float* panel, float* y) {
  LookedUpWeights<kN> looked_up{.w = w, .n0 = n0, .values = {}};
  const int64_t words_per_group = w.group_size / 8;
  for (int64_t g = 0; g < w.cols / w.group_size; ++g) {
    looked_up.StartGroup(g);
    for (int64_t word = g * words_per_group; word < (g + 1) * words_per_group; word += 2) {
      for (int j = 0; j < kN; ++j)
        _mm512_storeu_ps(panel + j * PaddedStride(w.cols) + word * 8, looked_up.At(j, word));
    }
  }
  PanelWeights weights{.panel = panel, .stride = PaddedStride(w.cols)};
  int64_t m = 0;
  for (; m + kTile <= count; m += kTile) Tile<kTile, kN>(block, w, weights, m, n0, y);
  switch (count - m) {
    case 3:
      Tile<3, kN>(block, w, weights, m, n0, y);
      break;
    case 2:
      Tile<2, kN>(block, w, weights, m, n0, y);
      break;
    case 1:
      Tile<1, kN>(block, w, weights, m, n0, y);
      break;
  }
}

SPECD_AVX512 void PanelGemm(const float* x, int64_t rows, const Int4Matrix& w, int64_t n_begin,
                            int64_t n_end, float* y) {
  const int64_t block_rows =
      std::max<int64_t>(kPanelMinRows, kBlockFloats / w.cols / kTile * kTile);
  thread_local std::vector<float> block, panel;
  const int64_t stride = PaddedStride(w.cols);
  block.resize(std::min(rows, block_rows) * stride);
  panel.resize(kTile * stride);
  for (int64_t m0 = 0; m0 < rows; m0 += block_rows) {
    const int64_t count = std::min(block_rows, rows - m0);
    InterleaveColumns(x + m0 * w.cols, count, w.cols, stride, block.data());
    const InterleavedRows rows_of_block{.data = block.data(), .stride = stride};
    float* const y_block = y + m0 * w.rows;
    int64_t n = n_begin;
    for (; n + kTile <= n_end; n += kTile) {
      PanelRows<kTile>(rows_of_block, count, w, n, panel.data(), y_block);
    }
    for (; n < n_end; ++n) PanelRows<1>(rows_of_block, count, w, n, panel.data(), y_block);
  }
}

}  // namespace

SPECD_AVX512 void W4A16GemmAvx512(const float* x, int64_t rows, const Int4Matrix& w,
                                  int64_t n_begin, int64_t n_end, float* y) {
  if (rows >= kPanelMinRows) return PanelGemm(x, rows, w, n_begin, n_end, y);
  thread_local std::vector<float> interleaved;
  const int64_t stride = PaddedStride(w.cols);
  interleaved.resize(rows * stride);
  InterleaveColumns(x, rows, w.cols, stride, interleaved.data());
  const InterleavedRows xi{.data = interleaved.data(), .stride = stride};

  // One x row: 8 W rows per tile, enough independent accumulators to cover the FMA latency.
  // Several: 4 x rows by 4 W rows (16 accumulators, 4 dequantized weights, 4 value tables), x
  // rows the inner loop, so a tile's packed weights come from L1 after the first rows.
  constexpr int kSingleRowTile = 8;
  int64_t n = n_begin;
  if (rows == 1) {
    for (; n + kSingleRowTile <= n_end; n += kSingleRowTile)
      LookUpTile<1, kSingleRowTile>(xi, w, 0, n, y);
  }
  for (; n + kTile <= n_end; n += kTile) {
    int64_t m = 0;
    for (; m + kTile <= rows; m += kTile) LookUpTile<kTile, kTile>(xi, w, m, n, y);
    switch (rows - m) {
      case 3:
        LookUpTile<3, kTile>(xi, w, m, n, y);
        break;
      case 2:
        LookUpTile<2, kTile>(xi, w, m, n, y);
        break;
      case 1:
        LookUpTile<1, kTile>(xi, w, m, n, y);
        break;
    }
  }
  for (; n < n_end; ++n) {
    int64_t m = 0;
    for (; m + kTile <= rows; m += kTile) LookUpTile<kTile, 1>(xi, w, m, n, y);
    for (; m < rows; ++m) LookUpTile<1, 1>(xi, w, m, n, y);
  }
}

}  // namespace specd::kernels::cpu::internal
