#include "kernels/cpu/rms_norm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>

#include "kernels/cpu/lane_fold.h"
#include "kernels/cpu/vector_exp.h"

namespace specd::kernels::cpu {
namespace {

// A pool part's rows are a few KiB at least (ParallelFor runs fewer on the calling thread), so a
// decode step's one row stays there.
constexpr int64_t kMinPartFloats = 4096;

// 1 / √(mean(x²) + eps) of a row.
__attribute__((target_clones("avx512f", "avx2", "default"))) float InverseRms(const float* x,
                                                                              int64_t dim,
                                                                              float eps) {
  const float sum = LaneSum(FoldLanes(x, dim, 0, [](float sum, float v) { return sum + v * v; }));
  return 1.0f / std::sqrt(sum / static_cast<float>(dim) + eps);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void ScaleRow(
    const float* x, int64_t dim, float inverse_rms, const float* weight, float offset, float* out) {
  for (int64_t i = 0; i < dim; ++i) out[i] = x[i] * inverse_rms * (weight[i] + offset);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void GateRow(
    const float* x, const float* gate, int64_t dim, float inverse_rms, const float* weight,
    float* out) {
  for (int64_t i = 0; i < dim; ++i) out[i] = x[i] * inverse_rms * weight[i] * VectorSilu(gate[i]);
}

void ForRows(int64_t rows, int64_t dim, ThreadPool& pool, const std::function<void(int64_t)>& row) {
  const int64_t rows_per_part = std::max<int64_t>(1, kMinPartFloats / std::max<int64_t>(dim, 1));
  pool.ParallelFor(rows, rows_per_part, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) row(r);
  });
}

}  // namespace

void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, bool zero_centred,
             float eps, float* out, ThreadPool& pool) {
  const float offset = zero_centred ? 1.0f : 0.0f;
  ForRows(rows, dim, pool, [&](int64_t r) {
    const float* row = x + r * dim;
    ScaleRow(row, dim, InverseRms(row, dim, eps), weight, offset, out + r * dim);
  });
}

void GatedRmsNorm(const float* x, const float* gate, int64_t rows, int64_t dim, const float* weight,
                  float eps, float* out, ThreadPool& pool) {
  ForRows(rows, dim, pool, [&](int64_t r) {
    const float* row = x + r * dim;
    GateRow(row, gate + r * dim, dim, InverseRms(row, dim, eps), weight, out + r * dim);
  });
}

}  // namespace specd::kernels::cpu
