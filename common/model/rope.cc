#include "common/model/rope.h"

#include <ATen/ATen.h>

#include <cmath>

#include "common/model/ops/ops.h"

namespace specd::model {

RotaryEmbedding::RotaryEmbedding(int64_t rotary_dim, double theta, const ModelOptions& options)
    : device_(options.device), dtype_(options.dtype) {
  const at::Tensor exponents =
      at::arange(0, rotary_dim, 2, at::kFloat) / static_cast<double>(rotary_dim);
  inv_freq_ = at::pow(theta, exponents).reciprocal();
}

RotaryAngles RotaryEmbedding::Angles(int64_t start, int64_t count) const {
  return Angles(at::arange(start, start + count, at::kLong));
}

RotaryAngles RotaryEmbedding::Angles(const at::Tensor& positions) const {
  // Each angle's cos and sin on its own, on the CPU: LibTorch's vectorised loops round an element
  // one way in a vector and another in the scalar tail, placed by the call's size, and a
  // position's angles must not depend on the positions beside it (a verify block's rows are
  // then its decode steps' bit for bit). Float32 positions and products, as the reference's.
  const at::Tensor at_positions = positions.to(at::kCPU, at::kFloat).contiguous();
  const int64_t rows = at_positions.numel(), half = inv_freq_.numel();
  at::Tensor cos = at::empty({rows, 2 * half}, at::kFloat);
  at::Tensor sin = at::empty({rows, 2 * half}, at::kFloat);
  const float* position = at_positions.data_ptr<float>();
  const float* inv_freq = inv_freq_.data_ptr<float>();
  float* cos_row = cos.data_ptr<float>();
  float* sin_row = sin.data_ptr<float>();
  for (int64_t t = 0; t < rows; ++t, cos_row += 2 * half, sin_row += 2 * half) {
    for (int64_t i = 0; i < half; ++i) {
      const float angle = position[t] * inv_freq[i];
      cos_row[i] = cos_row[half + i] = std::cos(angle);
      sin_row[i] = sin_row[half + i] = std::sin(angle);
    }
  }
  return {cos.to(device_, dtype_), sin.to(device_, dtype_)};
}

at::Tensor ApplyRotary(const at::Tensor& x, const RotaryAngles& angles) {
  return ops::Rotary(x, angles.cos, angles.sin);
}

}  // namespace specd::model
