#pragma once
// An INT4 weight matrix in the compressed-tensors `pack-quantized` form: signed codes q in
// [-8, 7] on a grid of per-group scales (and zero points), W[n, k] = (q - zero[n, g]) · scale[n, g]
// with g the group of column k. The codes stay packed, eight to an int32 word.
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "common/io/dtype.h"

namespace specd::quant {

inline constexpr int kInt4Min = -8;
inline constexpr int kInt4Max = 7;
inline constexpr int kInt4PerWord = 8;
inline constexpr int kInt4NibbleOffset = 8;  // a stored nibble is the value + 8, in [0, 15]

// The quantization grid of a [rows, cols] weight: everything but the codes.
struct Int4Grid {
  int64_t rows = 0;                          // N, output features
  int64_t cols = 0;                          // K, input features
  int64_t group_size = 0;                    // columns that share a scale; cols when channel-wise
  std::vector<float> scales;                 // [rows, groups()]
  io::DType scale_dtype = io::DType::kBF16;  // how a checkpoint stores them: F32, BF16 or F16
  std::vector<int8_t> zero_points;           // [rows, groups()] in [-8, 7]; empty: symmetric
  std::vector<int32_t> group_index;          // [cols] act-order group of each column (GPTQ
                                     // `weight_g_idx`); empty: column k is in k / group_size

  int64_t groups() const { return group_size > 0 ? cols / group_size : 0; }
  bool symmetric() const { return zero_points.empty(); }
  int64_t GroupOf(int64_t column) const {
    return group_index.empty() ? column / group_size : group_index[column];
  }
};

// Sizes and ranges a grid must have: positive shape, a group size that divides cols, one scale
// (finite) and at most one zero point per group and row, zero points in [-8, 7], and group
// indices, if any, one per column and below groups().
absl::Status ValidateInt4Grid(const Int4Grid& grid);

// Int32 words that hold `count` INT4 values, eight to a word: ceil(count / 8).
inline int64_t Int4WordCount(int64_t count) { return (count + kInt4PerWord - 1) / kInt4PerWord; }

// Codes in the compressed-tensors order: column k of a row is nibble k % 8 (low nibble first) of
// the row's word k / 8 and holds q + 8; the nibbles past cols in a row's last word are 0.
struct PackedInt4Weight {
  Int4Grid grid;
  std::vector<int32_t> packed;  // [rows, Int4WordCount(cols)]
};

// Packs codes q [rows, cols] (row-major, each in [-8, 7]) on `grid`, after rounding its scales
// to grid.scale_dtype so that they are what a checkpoint would hold.
absl::StatusOr<PackedInt4Weight> PackInt4(Int4Grid grid, std::span<const int8_t> codes);

// The codes q [rows, cols], row-major.
std::vector<int8_t> UnpackInt4(const PackedInt4Weight& weight);

// W [rows, cols] as float32, row-major: the reference the fused kernels are tested against.
std::vector<float> Dequantize(const PackedInt4Weight& weight);

}  // namespace specd::quant
