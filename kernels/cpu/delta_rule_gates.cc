#include "kernels/cpu/delta_rule_gates.h"

#include <cmath>

namespace specd::kernels::cpu {

void DeltaRuleGates(const float* a, const float* b, int64_t rows, int64_t heads, const float* a_log,
                    const float* dt_bias, float* g, float* beta) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t at = r * heads + h;
      // softplus as LibTorch's (threshold 20: past it, x itself).
      const float x = a[at] + dt_bias[h];
      const float softplus = x > 20.0f ? x : std::log1p(std::exp(x));
      g[at] = -std::exp(a_log[h]) * softplus;
      beta[at] = 1.0f / (1.0f + std::exp(-b[at]));
    }
  }
}

}  // namespace specd::kernels::cpu
