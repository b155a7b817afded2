#pragma once
// A W4A16 weight held in LibTorch tensors on a device, in the layout kernels/cuda's W4A16 GEMM
// reads: the checkpoint's pack-quantized words with the columns sorted by group (an act-order
// weight is repacked once, as for the CPU kernel), bf16 scales and int8 zero points. Made at load
// from the CPU kernel's layout; a projection gathers x into the sorted column order.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/int4/int4_kernel_weight.h"

namespace specd::model::ops {

struct Int4Tensors {
  at::Tensor packed;       // int32 [rows, cols / 8]
  at::Tensor scales;       // bf16 [rows, cols / group_size]
  at::Tensor zero_points;  // int8 [rows, cols / group_size], q units; undefined: symmetric
  at::Tensor
      input_order;  // int64 [cols]: sorted column j reads x column input_order[j]; undefined: j
  int64_t group_size = 0;

  int64_t rows() const { return packed.size(0); }
  int64_t cols() const { return packed.size(1) * 8; }
  // Device bytes of the packed words, scales and zero points (as Int4KernelWeight::ByteSize).
  int64_t ByteSize() const {
    return static_cast<int64_t>(packed.nbytes() + scales.nbytes() +
                                (zero_points.defined() ? zero_points.nbytes() : 0));
  }

  // A copy of an exact-activation weight on `device`. Scales become bf16, as the kernel reads
  // them: exact for the bf16 scales checkpoints store, rounded once for float32 ones.
  static absl::StatusOr<Int4Tensors> Upload(const quant::Int4KernelWeight& weight,
                                            c10::Device device);
};

}  // namespace specd::model::ops
