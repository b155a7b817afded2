#include "kernels/cpu/silu_mul.h"

#include "kernels/cpu/vector_exp.h"

namespace specd::kernels::cpu {
namespace {

constexpr int64_t kMinParallelCount = 16384;

__attribute__((target_clones("avx512f", "avx2", "default"))) void SiluMulRange(
    const float* gate, const float* up, int64_t begin, int64_t end, float* out) {
  for (int64_t i = begin; i < end; ++i) out[i] = VectorSilu(gate[i]) * up[i];
}

}  // namespace

void SiluMul(const float* gate, const float* up, int64_t count, float* out, ThreadPool& pool) {
  if (count < kMinParallelCount) return SiluMulRange(gate, up, 0, count, out);
  pool.ParallelFor(count, 16,
                   [&](int64_t begin, int64_t end) { SiluMulRange(gate, up, begin, end, out); });
}

}  // namespace specd::kernels::cpu
