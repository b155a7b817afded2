#include "kernels/cpu/dense_gemv.h"

namespace specd::kernels::cpu {
namespace {

// Eight lanes: one AVX register, or two SSE ones on CPUs without AVX2.
typedef float Lanes __attribute__((vector_size(32)));

// Rows [begin, end), four at a time so that each load of x serves four rows. One body compiled
// twice, for AVX + FMA and for the x86-64 baseline; the loader picks one by the CPU's features
// ("arch=haswell" would instead match only that CPU model, and newer ones would get the baseline).
__attribute__((target_clones("fma", "default"))) void GemvRows(const float* w, int64_t cols,
                                                               const float* x, float* y,
                                                               int64_t begin, int64_t end) {
  const int64_t vector_cols = cols / 8 * 8;
  int64_t row = begin;
  for (; row + 4 <= end; row += 4) {
    const float* r[4] = {w + row * cols, w + (row + 1) * cols, w + (row + 2) * cols,
                         w + (row + 3) * cols};
    Lanes sum[4] = {};
    for (int64_t k = 0; k < vector_cols; k += 8) {
      Lanes xs;
      __builtin_memcpy(&xs, x + k, sizeof xs);
      for (int i = 0; i < 4; ++i) {
        Lanes ws;
        __builtin_memcpy(&ws, r[i] + k, sizeof ws);
        sum[i] += ws * xs;
      }
    }
    for (int i = 0; i < 4; ++i) {
      float total = 0;
      for (int lane = 0; lane < 8; ++lane) total += sum[i][lane];
      for (int64_t k = vector_cols; k < cols; ++k) total += r[i][k] * x[k];
      y[row + i] = total;
    }
  }
  for (; row < end; ++row) {
    float total = 0;
    for (int64_t k = 0; k < cols; ++k) total += w[row * cols + k] * x[k];
    y[row] = total;
  }
}

}  // namespace

void DenseGemv(const float* w, int64_t rows, int64_t cols, const float* x, float* y,
               ThreadPool& pool) {
  pool.ParallelFor(rows, 4,
                   [&](int64_t begin, int64_t end) { GemvRows(w, cols, x, y, begin, end); });
}

}  // namespace specd::kernels::cpu
