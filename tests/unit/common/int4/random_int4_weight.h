#pragma once
// Random INT4 weights for the codec and kernel-layout tests.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "common/int4/packed_int4_weight.h"

namespace specd::quant::testing {

struct Int4Layout {
  int64_t rows;
  int64_t cols;
  int64_t group_size;
  bool symmetric = true;
  bool act_order = false;  // a GPTQ-style group index: a random permutation cut into groups
  io::DType scale_dtype = io::DType::kBF16;
};

inline Int4Grid RandomGrid(const Int4Layout& layout, std::mt19937& rng) {
  Int4Grid grid{.rows = layout.rows,
                .cols = layout.cols,
                .group_size = layout.group_size,
                .scales = std::vector<float>(layout.rows * (layout.cols / layout.group_size)),
                .scale_dtype = layout.scale_dtype,
                .zero_points = {},
                .group_index = {}};
  std::uniform_real_distribution<float> scale(1e-3f, 5e-2f);
  for (float& s : grid.scales) s = scale(rng);
  if (!layout.symmetric) {
    grid.zero_points.resize(grid.scales.size());
    for (int8_t& zero : grid.zero_points) zero = static_cast<int8_t>(int(rng() % 16) - 8);
  }
  if (layout.act_order) {
    std::vector<int32_t> order(layout.cols);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    grid.group_index.resize(layout.cols);
    for (int64_t i = 0; i < layout.cols; ++i) {
      grid.group_index[order[i]] = static_cast<int32_t>(i / layout.group_size);
    }
  }
  return grid;
}

inline std::vector<int8_t> RandomCodes(int64_t count, std::mt19937& rng) {
  std::vector<int8_t> codes(count);
  for (int8_t& code : codes) code = static_cast<int8_t>(int(rng() % 16) - 8);
  return codes;
}

inline PackedInt4Weight RandomPackedWeight(const Int4Layout& layout, std::mt19937& rng) {
  return *PackInt4(RandomGrid(layout, rng), RandomCodes(layout.rows * layout.cols, rng));
}

}  // namespace specd::quant::testing
