#pragma once
// Round-to-nearest INT4 quantization onto compressed-tensors' min-max grid (research/qwen35.md
// §5.2, `calculate_qparams`): per group of columns, with min clamped to ≤ 0 and max to ≥ 0,
//   symmetric:  s = max(|min|, |max|) / 7.5,  z = 0
//   asymmetric: s = (max − min) / 15,         z = round(clamp(−8 − min / s, −8, 7))
// and codes q = round(clamp(w / s + z, −8, 7)) (ties to even). A group of zeros gets s = 1.
#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "common/int4/packed_int4_weight.h"
#include "common/io/dtype.h"

namespace specd::quant {

struct RtnOptions {
  int64_t group_size = 128;  // columns per scale; 0: channel-wise (one scale per row)
  bool symmetric = true;
  io::DType scale_dtype = io::DType::kBF16;  // as a BF16 model's checkpoint stores them
};

// The min-max grid of W [rows, cols] (row-major), scales already rounded to the stored dtype.
absl::StatusOr<Int4Grid> MinMaxGrid(std::span<const float> weight, int64_t rows, int64_t cols,
                                    const RtnOptions& options);

// W [rows, cols] rounded onto `grid` (any grid: min-max, AWQ's or a frozen QAD one).
absl::StatusOr<PackedInt4Weight> QuantizeOnGrid(std::span<const float> weight, Int4Grid grid);

// MinMaxGrid then QuantizeOnGrid.
absl::StatusOr<PackedInt4Weight> QuantizeRtn(std::span<const float> weight, int64_t rows,
                                             int64_t cols, const RtnOptions& options);

}  // namespace specd::quant
