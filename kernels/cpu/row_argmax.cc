#include "kernels/cpu/row_argmax.h"

// GCC 12 flags the `_mm512_undefined_*` inside its own AVX-512 intrinsics as uninitialized when
// they are inlined into target("avx512f") functions (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace specd::kernels::cpu {
namespace {

// The winner of a run of columns; index −1 for an empty run.
struct Best {
  float value = 0;
  int64_t index = -1;
};

// The winner of two runs, `first` before `second`.
Best Better(const Best& first, const Best& second) {
  if (first.index < 0 || std::isnan(first.value)) return first.index < 0 ? second : first;
  if (second.index >= 0 && (std::isnan(second.value) || second.value > first.value)) return second;
  return first;
}

Best ScanScalar(const float* x, int64_t begin, int64_t end) {
  Best best;
  for (int64_t i = begin; i < end; ++i) {
    if (std::isnan(x[i])) return {x[i], i};
    if (best.index < 0 || x[i] > best.value) best = {x[i], i};
  }
  return best;
}

// Sixteen lanes each keep their largest entry and its first column; a run with a NaN in it (a
// broken model's logits) is scanned again for the first one.
__attribute__((target("avx512f"))) Best ScanAvx512(const float* x, int64_t begin, int64_t end) {
  if (end - begin < 16) return ScanScalar(x, begin, end);
  const __m512i step = _mm512_set1_epi32(16);
  __m512i column = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512 best = _mm512_loadu_ps(x + begin);
  __m512i best_column = column;  // relative to begin
  __mmask16 nan = _mm512_cmp_ps_mask(best, best, _CMP_UNORD_Q);
  int64_t i = begin + 16;
  for (; i + 16 <= end; i += 16) {
    column = _mm512_add_epi32(column, step);
    const __m512 v = _mm512_loadu_ps(x + i);
    const __mmask16 larger = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ);
    best = _mm512_mask_mov_ps(best, larger, v);
    best_column = _mm512_mask_mov_epi32(best_column, larger, column);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  }
  if (nan != 0) return ScanScalar(x, begin, end);
  alignas(64) float values[16];
  alignas(64) int32_t columns[16];
  _mm512_store_ps(values, best);
  _mm512_store_si512(columns, best_column);
  Best lanes{values[0], begin + columns[0]};
  for (int lane = 1; lane < 16; ++lane) {
    const int64_t index = begin + columns[lane];
    if (values[lane] > lanes.value || (values[lane] == lanes.value && index < lanes.index)) {
      lanes = {values[lane], index};
    }
  }
  return Better(lanes, ScanScalar(x, i, end));
}

Best Scan(const float* x, int64_t begin, int64_t end) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512 ? ScanAvx512(x, begin, end) : ScanScalar(x, begin, end);
}

}  // namespace

void RowArgmax(const float* x, int64_t rows, int64_t cols, int64_t stride, int64_t* out,
               ThreadPool& pool) {
  if (rows <= 0) return;
  // Each row in as many slices as it takes to give every thread one, in whole cache lines.
  const int64_t slices = std::max<int64_t>(1, pool.size() / rows);
  const int64_t slice_cols = (cols + slices * 16 - 1) / (slices * 16) * 16;
  std::vector<Best> best(rows * slices);
  pool.ParallelFor(rows * slices, 1, [&](int64_t begin, int64_t end) {
    for (int64_t piece = begin; piece < end; ++piece) {
      const int64_t row = piece / slices, slice = piece % slices;
      const int64_t first = std::min(cols, slice * slice_cols);
      best[piece] = Scan(x + row * stride, first, std::min(cols, first + slice_cols));
    }
  });
  for (int64_t row = 0; row < rows; ++row) {
    Best winner = best[row * slices];
    for (int64_t slice = 1; slice < slices; ++slice) {
      winner = Better(winner, best[row * slices + slice]);
    }
    out[row] = winner.index;
  }
}

}  // namespace specd::kernels::cpu
