#pragma once
// The float formats quantization scales are stored in (float32, bfloat16, float16), converted to
// and from the float32 the codec and kernels compute with. Every bf16 or f16 value is exact in
// float32, so decoding and re-encoding a checkpoint's scales gives back the same bits.
#include <cstddef>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "common/io/dtype.h"
#include "common/io/tensor_view.h"

namespace specd::quant {

// Whether scales can be stored as `dtype`: F32, BF16 or F16.
bool IsScaleDType(io::DType dtype);

// `value` rounded to the nearest `dtype` value (ties to even), as float32. Needs IsScaleDType.
float RoundToDType(float value, io::DType dtype);

// The elements of a F32, BF16 or F16 tensor as float32; other dtypes are an error naming it.
absl::StatusOr<std::vector<float>> DecodeFloats(const io::TensorView& tensor);

// `values` rounded to `dtype` and laid out as a little-endian tensor. Needs IsScaleDType.
std::vector<std::byte> EncodeFloats(std::span<const float> values, io::DType dtype);

}  // namespace specd::quant
