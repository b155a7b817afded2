// AVX-512 body: 16 lanes, two packed words at a time, dequantized by table lookup. Per group and
// W row, a register holds the 16 values a nibble can stand for; a weight is then one variable
// shift and one vpermps, against shift, mask, convert and fma in the AVX2 body; on two cores the
// M = 1 loop is otherwise limited by instructions rather than by memory.
//
// A 64-bit broadcast puts word 2p in the even lanes and word 2p + 1 in the odd ones; lane i
// shifts by 4·(i / 2), so it holds column 8·(i % 2) + i / 2 of its 16. Rather than shuffle the
// weights, each call reorders x once to match (a cost of K per x row against N·K per call).
//
// Many x rows (prefill chunks) make the product bound by the FMA ports, and dequantizing in the
// tile (a third of its vector ops) is what it does besides. From 32 rows each weight is
// dequantized once per block of x rows instead, 8 W rows at a time into a panel in column order,
// and a register tile of 32 x rows (two vectors of x transposed, rows along the lanes) by those 8
// W rows takes per column two loads of x and eight broadcast weights into 16 FMAs.

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

// x in the lane order above, for every 16 columns of every row.
SPECD_AVX512 void InterleaveColumns(const float* x, int64_t rows, int64_t cols, float* out) {
  const __m512i lane_columns =
      _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  for (int64_t i = 0; i < rows * cols; i += 16) {
    _mm512_storeu_ps(out + i, _mm512_permutexvar_ps(lane_columns, _mm512_loadu_ps(x + i)));
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

// y[m0 + i, n0 + j] for i < kM, j < kN, from x in interleaved lane order.
template <int kM, int kN>
SPECD_AVX512 void Tile(const float* x, const Int4Matrix& w, int64_t m0, int64_t n0, float* y) {
  const int64_t groups = w.cols / w.group_size;
  const int64_t words_per_row = w.cols / 8;
  const int64_t words_per_group = w.group_size / 8;
  const __m512i nibble_shifts =
      _mm512_setr_epi32(0, 0, 4, 4, 8, 8, 12, 12, 16, 16, 20, 20, 24, 24, 28, 28);

  __m512 acc[kM][kN];
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t g = 0; g < groups; ++g) {
    __m512 values[kN];
    for (int j = 0; j < kN; ++j) values[j] = NibbleValues(w, n0 + j, g);
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

// Blocks as in BLIS: x rows in blocks of kBlockRows, their columns kPanelColumns at a time
// transposed into a block (128 KiB, in L2) that every panel of the call's W rows meets; a panel
// is kPanelRows W rows by those columns, dequantized (8 KiB, in L1) once per row block (128 rows:
// 4–6 % faster prefill than 64, each panel dequantized half as often); the block's sums over the
// columns so far wait in L2 between column blocks.
constexpr int64_t kPanelRows = 8;
constexpr int64_t kPanelColumns = 256;
constexpr int64_t kBlockRows = 128;
// x rows per tile: two vectors.
constexpr int64_t kTileRows = 32;
// x rows from which the panels pay: at 16 the tile has 8 sums in flight, too few to cover the
// FMA latency, and the table-lookup tile above is faster.
constexpr int64_t kPanelMinRows = 32;

// Columns [k0, k0 + columns) of x rows [m0, m0 + count) as `columns` rows of `padded` floats
// (count rounded up to 16, zeros past it).
void TransposeBlock(const float* x, int64_t cols, int64_t m0, int64_t count, int64_t padded,
                    int64_t k0, int64_t columns, float* block) {
  for (int64_t i = 0; i < padded; ++i) {
    if (i >= count) {
      for (int64_t k = 0; k < columns; ++k) block[k * padded + i] = 0.0f;
      continue;
    }
    const float* row = x + (m0 + i) * cols + k0;
    for (int64_t k = 0; k < columns; ++k) block[k * padded + i] = row[k];
  }
}

// Columns [k0, k0 + columns) of W rows [n0, n0 + count) dequantized in column order into panel
// rows kPanelColumns apart; the panel's other rows (count < kPanelRows) are zeros.
SPECD_AVX512 void DequantizePanel(const Int4Matrix& w, int64_t n0, int64_t count, int64_t k0,
                                  int64_t columns, float* panel) {
  const int64_t words_per_row = w.cols / 8;
  // Lane i takes nibble i % 8 of word i / 8 of a pair: columns in order.
  const __m512i nibble_shifts =
      _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
  for (int64_t j = 0; j < kPanelRows; ++j) {
    float* out = panel + j * kPanelColumns;
    if (j >= count) {
      std::memset(out, 0, columns * sizeof(float));
      continue;
    }
    const int64_t n = n0 + j;
    for (int64_t group = k0 / w.group_size; group * w.group_size < k0 + columns; ++group) {
      const __m512 values = NibbleValues(w, n, group);
      const int64_t end = std::min(k0 + columns, (group + 1) * w.group_size);
      for (int64_t k = std::max(k0, group * w.group_size); k < end; k += 16) {
        const int32_t* words = w.packed + n * words_per_row + k / 8;
        const __m512i pair = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(words[0])),
                                                _mm256_set1_epi32(words[1]), 1);
        _mm512_storeu_ps(out + (k - k0),
                         _mm512_permutexvar_ps(_mm512_srlv_epi32(pair, nibble_shifts), values));
      }
    }
  }
}

// Where a tile's sums go: `sums` (kPanelRows rows of kTileRows lanes) between column blocks,
// y after the last one.
struct TileSums {
  float* sums;
  bool first;  // the first column block: the sums start from zero
  bool last;   // the last: they go to y[m0 + i, n0 + j], i < rows, j < count
  float* y;
  int64_t y_stride;
  int64_t rows;
  int64_t count;
};

// Adds a panel's `columns` columns to the sums of 16 · kVectors x rows (from `block`, `padded`
// rows per column) against its W rows.
template <int kVectors>
SPECD_AVX512 void PanelTile(const float* block, int64_t padded, const float* panel, int64_t columns,
                            const TileSums& out) {
  __m512 acc[kPanelRows][kVectors];
  for (int j = 0; j < kPanelRows; ++j) {
    for (int v = 0; v < kVectors; ++v) {
      acc[j][v] =
          out.first ? _mm512_setzero_ps() : _mm512_loadu_ps(out.sums + j * kTileRows + 16 * v);
    }
  }
#pragma GCC unroll 4
  for (int64_t k = 0; k < columns; ++k) {
    __m512 xs[kVectors];
    for (int v = 0; v < kVectors; ++v) xs[v] = _mm512_loadu_ps(block + k * padded + 16 * v);
    for (int j = 0; j < kPanelRows; ++j) {
      const __m512 weight = _mm512_set1_ps(panel[j * kPanelColumns + k]);
      for (int v = 0; v < kVectors; ++v) acc[j][v] = _mm512_fmadd_ps(xs[v], weight, acc[j][v]);
    }
  }
  for (int j = 0; j < kPanelRows; ++j) {
    for (int v = 0; v < kVectors; ++v) {
      _mm512_storeu_ps(out.sums + j * kTileRows + 16 * v, acc[j][v]);
    }
  }
  if (!out.last) return;
  // Each x row's kPanelRows sums are consecutive in y.
  for (int64_t i = 0; i < std::min<int64_t>(16 * kVectors, out.rows); ++i) {
    for (int64_t j = 0; j < out.count; ++j)
      out.y[i * out.y_stride + j] = out.sums[j * kTileRows + i];
  }
}

SPECD_AVX512 void PanelGemm(const float* x, int64_t rows, const Int4Matrix& w, int64_t n_begin,
                            int64_t n_end, float* y) {
  const int64_t panels = (n_end - n_begin + kPanelRows - 1) / kPanelRows;
  const int64_t tiles_per_block = kBlockRows / kTileRows;
  thread_local std::vector<float> block, panel, sums;
  block.resize(kPanelColumns * kBlockRows);
  panel.resize(kPanelRows * kPanelColumns);
  sums.resize(panels * tiles_per_block * kPanelRows * kTileRows);
  for (int64_t m0 = 0; m0 < rows; m0 += kBlockRows) {
    const int64_t count = std::min(kBlockRows, rows - m0);
    const int64_t padded = (count + 15) / 16 * 16;
    for (int64_t k0 = 0; k0 < w.cols; k0 += kPanelColumns) {
      const int64_t columns = std::min(kPanelColumns, w.cols - k0);
      TransposeBlock(x, w.cols, m0, count, padded, k0, columns, block.data());
      for (int64_t p = 0; p < panels; ++p) {
        const int64_t n0 = n_begin + p * kPanelRows;
        const int64_t w_rows = std::min(kPanelRows, n_end - n0);
        DequantizePanel(w, n0, w_rows, k0, columns, panel.data());
        for (int64_t t = 0; t * kTileRows < padded; ++t) {
          const int64_t tile_m = t * kTileRows;
          const TileSums out{
              .sums = sums.data() + (p * tiles_per_block + t) * kPanelRows * kTileRows,
              .first = k0 == 0,
              .last = k0 + columns == w.cols,
              .y = y + (m0 + tile_m) * w.rows + n0,
              .y_stride = w.rows,
              .rows = count - tile_m,
              .count = w_rows};
          if (tile_m + kTileRows <= padded) {
            PanelTile<2>(block.data() + tile_m, padded, panel.data(), columns, out);
          } else {
            PanelTile<1>(block.data() + tile_m, padded, panel.data(), columns, out);
          }
        }
      }
    }
  }
}

}  // namespace

SPECD_AVX512 void W4A16GemmAvx512(const float* x, int64_t rows, const Int4Matrix& w,
                                  int64_t n_begin, int64_t n_end, float* y) {
  if (rows >= kPanelMinRows) return PanelGemm(x, rows, w, n_begin, n_end, y);
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
