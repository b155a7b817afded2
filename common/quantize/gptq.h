#pragma once
// GPTQ (Frantar et al. 2022, the IST-DASLab reference) as Nota's DFlash drafter recipe runs it
// (research/dflash.md §6.6): the Hessian H = 2/N · XᵀX of a Linear's calibration inputs drives
// a column-by-column rounding of W onto an INT4 grid in which each column's rounding error is
// spread over the columns not yet rounded, so that X·Wᵀ changes as little as possible. Unlike
// RTN (rtn.h), a group's scale is taken when its first column is reached, on the already
// error-updated weights; symmetric scales are max|W_g| / 7 on the full [−8, 7] grid.
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/int4/packed_int4_weight.h"
#include "common/io/dtype.h"

namespace specd::quant {

// The running-mean Hessian 2/N · XᵀX of one Linear's inputs, in float32, on the device the
// first rows come from: after n rows, m more rows X update H ← H·n/(n+m) + 2/(n+m) · XᵀX.
class HessianAccumulator {
 public:
  explicit HessianAccumulator(int64_t in_features);

  // Adds the rows of x [..., in_features] (any float dtype). Refuses another last dimension or
  // a device other than that of the rows added before.
  absl::Status Add(const at::Tensor& x);

  const at::Tensor& hessian() const { return hessian_; }  // [in, in] float32
  int64_t samples() const { return samples_; }

 private:
  int64_t in_features_;
  at::Tensor hessian_;
  int64_t samples_ = 0;
};

struct GptqOptions {
  int64_t group_size = 128;  // columns per scale; 0: channel-wise (one scale per row)
  bool symmetric = true;     // false: min-max scale and zero point, as rtn.h
  double damp = 0.01;        // added to diag(H), times its mean
  // Columns in order of decreasing diag(H); the result's grid.group_index (compressed-tensors
  // `weight_g_idx`, actorder "group") gives each column's group.
  bool act_order = false;
  int64_t block_size = 128;                  // columns per lazy batch update
  io::DType scale_dtype = io::DType::kBF16;  // scales are rounded to it before they are used
};

// W [out, in] quantized with the Hessian [in, in] of its inputs (both any float dtype, any
// device; the work is on CPU, float32 but for the Hessian's inverse, taken in float64). Columns
// whose diag(H) is 0 saw no input: they are quantized as zeros. Errors: shapes that disagree, a
// group size that does not divide in, and a Hessian that is not positive definite after damping.
absl::StatusOr<PackedInt4Weight> GptqQuantize(const at::Tensor& weight, const at::Tensor& hessian,
                                              const GptqOptions& options);

}  // namespace specd::quant
