#include "common/model/rope.h"

#include <ATen/ATen.h>

#include "common/model/ops/ops.h"

namespace specd::model {

RotaryEmbedding::RotaryEmbedding(int64_t rotary_dim, double theta, const ModelOptions& options)
    : dtype_(options.dtype) {
  const at::Tensor exponents =
      at::arange(0, rotary_dim, 2, at::TensorOptions().dtype(at::kFloat).device(options.device)) /
      static_cast<double>(rotary_dim);
  inv_freq_ = at::pow(theta, exponents).reciprocal();
}

RotaryAngles RotaryEmbedding::Angles(int64_t start, int64_t count) const {
  return Angles(at::arange(start, start + count, inv_freq_.options().dtype(at::kLong)));
}

RotaryAngles RotaryEmbedding::Angles(const at::Tensor& positions) const {
  // float32 positions, as the reference's.
  const at::Tensor freqs = at::outer(positions.to(inv_freq_.options()), inv_freq_);
  const at::Tensor emb = at::cat({freqs, freqs}, -1);
  return {emb.cos().to(dtype_), emb.sin().to(dtype_)};
}

at::Tensor ApplyRotary(const at::Tensor& x, const RotaryAngles& angles) {
  return ops::Rotary(x, angles.cos, angles.sin);
}

}  // namespace specd::model
