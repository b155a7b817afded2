#include "common/int4/rtn.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/int4/float_encoding.h"

namespace specd::quant {
namespace {

absl::Status CheckWeightSize(std::span<const float> weight, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0 || static_cast<int64_t>(weight.size()) != rows * cols) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a [", rows, ", ", cols, "] weight, got ", weight.size(), " values"));
  }
  return absl::OkStatus();
}

// round(clamp(value, −8, 7)) with ties to even, as torch.round.
int8_t RoundToInt4(float value) {
  const float clamped = std::clamp(value, float{kInt4Min}, float{kInt4Max});
  return static_cast<int8_t>(std::nearbyint(clamped));
}

}  // namespace

absl::StatusOr<Int4Grid> MinMaxGrid(std::span<const float> weight, int64_t rows, int64_t cols,
                                    const RtnOptions& options) {
  if (absl::Status size = CheckWeightSize(weight, rows, cols); !size.ok()) return size;
  Int4Grid grid{.rows = rows,
                .cols = cols,
                .group_size = options.group_size == 0 ? cols : options.group_size,
                .scales = {},
                .scale_dtype = options.scale_dtype,
                .zero_points = {},
                .group_index = {}};
  if (grid.group_size < 0 || cols % grid.group_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "group size ", options.group_size, " does not divide the ", cols, " input columns"));
  }
  if (!IsScaleDType(options.scale_dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scales cannot be stored as ", io::DTypeName(options.scale_dtype), " (F32, BF16 or F16)"));
  }
  grid.scales.reserve(rows * grid.groups());
  if (!options.symmetric) grid.zero_points.reserve(rows * grid.groups());
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t group = 0; group < grid.groups(); ++group) {
      const auto values = weight.subspan(row * cols + group * grid.group_size, grid.group_size);
      const auto [min_it, max_it] = std::minmax_element(values.begin(), values.end());
      const float min = std::min(*min_it, 0.0f), max = std::max(*max_it, 0.0f);
      float scale = options.symmetric ? std::max(-min, max) / 7.5f : (max - min) / 15.0f;
      scale = RoundToDType(scale > 0 ? scale : 1.0f, options.scale_dtype);
      grid.scales.push_back(scale);
      if (!options.symmetric) grid.zero_points.push_back(RoundToInt4(kInt4Min - min / scale));
    }
  }
  return grid;
}

absl::StatusOr<PackedInt4Weight> QuantizeOnGrid(std::span<const float> weight, Int4Grid grid) {
  if (absl::Status valid = ValidateInt4Grid(grid); !valid.ok()) return valid;
  if (absl::Status size = CheckWeightSize(weight, grid.rows, grid.cols); !size.ok()) return size;
  for (float& scale : grid.scales) scale = RoundToDType(scale, grid.scale_dtype);
  std::vector<int8_t> codes(weight.size());
  for (int64_t row = 0; row < grid.rows; ++row) {
    for (int64_t col = 0; col < grid.cols; ++col) {
      const int64_t at = row * grid.groups() + grid.GroupOf(col);
      const float zero = grid.symmetric() ? 0.0f : grid.zero_points[at];
      codes[row * grid.cols + col] =
          RoundToInt4(weight[row * grid.cols + col] / grid.scales[at] + zero);
    }
  }
  return PackInt4(std::move(grid), codes);
}

absl::StatusOr<PackedInt4Weight> QuantizeRtn(std::span<const float> weight, int64_t rows,
                                             int64_t cols, const RtnOptions& options) {
  absl::StatusOr<Int4Grid> grid = MinMaxGrid(weight, rows, cols, options);
  if (!grid.ok()) return grid.status();
  return QuantizeOnGrid(weight, *std::move(grid));
}

}  // namespace specd::quant
