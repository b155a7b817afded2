#include "common/model/ops/int4_tensors.h"

#include <ATen/ATen.h>

#include "common/base/torch_errors.h"

namespace specd::model::ops {
namespace {

// A device copy of `count` host values of type T, viewed as `shape`.
template <typename T>
at::Tensor CopyToDevice(const T* values, at::IntArrayRef shape, at::ScalarType dtype,
                        c10::Device device) {
  return at::from_blob(const_cast<T*>(values), shape, at::TensorOptions().dtype(dtype))
      .to(device, /*non_blocking=*/false, /*copy=*/true);
}

}  // namespace

absl::StatusOr<Int4Tensors> Int4Tensors::Upload(const quant::Int4KernelWeight& weight,
                                                c10::Device device) {
  if (weight.activations() != quant::Int4Activations::kExact) {
    return absl::InvalidArgumentError(
        "a device copy of a W4A16 weight is made from its exact-activation layout");
  }
  const kernels::cpu::Int4Matrix matrix = weight.Matrix();
  const int64_t groups = matrix.cols / matrix.group_size;
  return base::CatchTorchErrors("uploading a W4A16 weight", [&] {
    Int4Tensors tensors;
    tensors.group_size = matrix.group_size;
    tensors.packed = CopyToDevice(matrix.packed, {matrix.rows, matrix.cols / 8}, at::kInt, device);
    tensors.scales =
        CopyToDevice(matrix.scales, {matrix.rows, groups}, at::kFloat, device).to(at::kBFloat16);
    if (matrix.zero_points != nullptr) {
      tensors.zero_points =
          CopyToDevice(matrix.zero_points, {matrix.rows, groups}, at::kChar, device);
    }
    if (!weight.input_order().empty()) {
      tensors.input_order =
          CopyToDevice(weight.input_order().data(), {matrix.cols}, at::kInt, device).to(at::kLong);
    }
    return tensors;
  });
}

}  // namespace specd::model::ops
