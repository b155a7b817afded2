#include "common/int4/packed_int4_weight.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/int4/float_encoding.h"

namespace specd::quant {
namespace {

int8_t CodeAt(const PackedInt4Weight& weight, int64_t row, int64_t col) {
  const uint32_t word = static_cast<uint32_t>(
      weight.packed[row * Int4WordCount(weight.grid.cols) + col / kInt4PerWord]);
  const uint32_t nibble = (word >> (4 * (col % kInt4PerWord))) & 0xF;
  return static_cast<int8_t>(static_cast<int>(nibble) - kInt4NibbleOffset);
}

}  // namespace

absl::Status ValidateInt4Grid(const Int4Grid& grid) {
  if (grid.rows <= 0 || grid.cols <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("INT4 weight shape [", grid.rows, ", ", grid.cols, "] is empty"));
  }
  if (grid.group_size <= 0 || grid.cols % grid.group_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "group size ", grid.group_size, " does not divide the ", grid.cols, " input columns"));
  }
  if (!IsScaleDType(grid.scale_dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scales cannot be stored as ", io::DTypeName(grid.scale_dtype), " (F32, BF16 or F16)"));
  }
  const int64_t per_grid = grid.rows * grid.groups();
  if (static_cast<int64_t>(grid.scales.size()) != per_grid) {
    return absl::InvalidArgumentError(absl::StrCat("expected ", per_grid, " scales [", grid.rows,
                                                   ", ", grid.groups(), "], got ",
                                                   grid.scales.size()));
  }
  for (float scale : grid.scales) {
    if (!std::isfinite(scale)) return absl::InvalidArgumentError("a scale is not finite");
  }
  if (!grid.zero_points.empty()) {
    if (static_cast<int64_t>(grid.zero_points.size()) != per_grid) {
      return absl::InvalidArgumentError(absl::StrCat("expected ", per_grid, " zero points [",
                                                     grid.rows, ", ", grid.groups(), "], got ",
                                                     grid.zero_points.size()));
    }
    for (int8_t zero : grid.zero_points) {
      if (zero < kInt4Min || zero > kInt4Max) {
        return absl::InvalidArgumentError(absl::StrCat("zero point ", zero, " is outside [-8, 7]"));
      }
    }
  }
  if (!grid.group_index.empty()) {
    if (static_cast<int64_t>(grid.group_index.size()) != grid.cols) {
      return absl::InvalidArgumentError(absl::StrCat(
          "expected a group index per column (", grid.cols, "), got ", grid.group_index.size()));
    }
    for (int32_t group : grid.group_index) {
      if (group < 0 || group >= grid.groups()) {
        return absl::InvalidArgumentError(
            absl::StrCat("group index ", group, " is outside [0, ", grid.groups(), ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<PackedInt4Weight> PackInt4(Int4Grid grid, std::span<const int8_t> codes) {
  if (absl::Status valid = ValidateInt4Grid(grid); !valid.ok()) return valid;
  if (static_cast<int64_t>(codes.size()) != grid.rows * grid.cols) {
    return absl::InvalidArgumentError(absl::StrCat("expected ", grid.rows * grid.cols, " codes [",
                                                   grid.rows, ", ", grid.cols, "], got ",
                                                   codes.size()));
  }
  for (float& scale : grid.scales) scale = RoundToDType(scale, grid.scale_dtype);
  const int64_t words_per_row = Int4WordCount(grid.cols);
  std::vector<int32_t> packed(grid.rows * words_per_row, 0);
  for (int64_t row = 0; row < grid.rows; ++row) {
    for (int64_t col = 0; col < grid.cols; ++col) {
      const int8_t code = codes[row * grid.cols + col];
      if (code < kInt4Min || code > kInt4Max) {
        return absl::InvalidArgumentError(
            absl::StrCat("code ", code, " at [", row, ", ", col, "] is outside [-8, 7]"));
      }
      const uint32_t nibble = static_cast<uint32_t>(code + kInt4NibbleOffset);
      int32_t& word = packed[row * words_per_row + col / kInt4PerWord];
      word =
          static_cast<int32_t>(static_cast<uint32_t>(word) | nibble << (4 * (col % kInt4PerWord)));
    }
  }
  return PackedInt4Weight{.grid = std::move(grid), .packed = std::move(packed)};
}

std::vector<int8_t> UnpackInt4(const PackedInt4Weight& weight) {
  const Int4Grid& grid = weight.grid;
  std::vector<int8_t> codes(grid.rows * grid.cols);
  for (int64_t row = 0; row < grid.rows; ++row) {
    for (int64_t col = 0; col < grid.cols; ++col) {
      codes[row * grid.cols + col] = CodeAt(weight, row, col);
    }
  }
  return codes;
}

std::vector<float> Dequantize(const PackedInt4Weight& weight) {
  const Int4Grid& grid = weight.grid;
  std::vector<float> dense(grid.rows * grid.cols);
  for (int64_t row = 0; row < grid.rows; ++row) {
    for (int64_t col = 0; col < grid.cols; ++col) {
      const int64_t at = row * grid.groups() + grid.GroupOf(col);
      const int zero = grid.symmetric() ? 0 : grid.zero_points[at];
      dense[row * grid.cols + col] =
          static_cast<float>(CodeAt(weight, row, col) - zero) * grid.scales[at];
    }
  }
  return dense;
}

}  // namespace specd::quant
