// Portable fallback, and the reference the vector paths are tested against.
#include "kernels/cpu/w4a16_gemm_internal.h"

namespace specd::kernels::cpu::internal {

void W4A16GemmScalar(const float* x, int64_t rows, const Int4Matrix& w, int64_t n_begin,
                     int64_t n_end, float* y) {
  const int64_t groups = w.cols / w.group_size;
  const int64_t words_per_row = w.cols / 8;
  for (int64_t n = n_begin; n < n_end; ++n) {
    const int32_t* row_words = w.packed + n * words_per_row;
    for (int64_t m = 0; m < rows; ++m) {
      const float* x_row = x + m * w.cols;
      float sum = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        const float scale = w.scales[n * groups + g];
        const int32_t zero = w.zero_points == nullptr ? 0 : w.zero_points[n * groups + g];
        for (int64_t k = g * w.group_size; k < (g + 1) * w.group_size; ++k) {
          const uint32_t word = static_cast<uint32_t>(row_words[k / 8]);
          const int32_t q = static_cast<int32_t>((word >> (4 * (k % 8))) & 0xF) - 8;
          sum += x_row[k] * (static_cast<float>(q - zero) * scale);
        }
      }
      y[m * w.rows + n] = sum;
    }
  }
}

}  // namespace specd::kernels::cpu::internal
