#pragma once
// A random 4-bit weight in the VNNI layout, as the kernels that read it are tested: any nibbles,
// scales in [10⁻³, 10⁻¹) per group, zero points in [−8, 7] unless symmetric.
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/vnni_gemm.h"

namespace specd::kernels::cpu::testing {

inline VnniMatrix RandomInt4VnniMatrix(int64_t rows, int64_t cols, int64_t group_size,
                                       bool symmetric, std::mt19937& rng) {
  std::vector<int32_t> packed(rows * cols / 8);
  for (int32_t& word : packed) word = static_cast<int32_t>(rng());
  std::vector<float> scales(rows * (cols / group_size));
  std::uniform_real_distribution<float> scale(1e-3f, 1e-1f);
  for (float& s : scales) s = scale(rng);
  std::vector<int8_t> zeros(scales.size());
  for (int8_t& zero : zeros) zero = static_cast<int8_t>(static_cast<int>(rng() % 16) - 8);
  return RepackInt4ForVnni({.packed = packed.data(),
                            .scales = scales.data(),
                            .zero_points = symmetric ? nullptr : zeros.data(),
                            .rows = rows,
                            .cols = cols,
                            .group_size = group_size});
}

}  // namespace specd::kernels::cpu::testing
