#include "common/model/rms_norm.h"

#include <ATen/ATen.h>

#include <utility>

namespace specd::model {
namespace {

at::Tensor NormalisedFloat32(const at::Tensor& x, double eps) {
  const at::Tensor x32 = x.to(at::kFloat);
  return x32 * at::rsqrt(x32.square().mean(-1, /*keepdim=*/true) + eps);
}

}  // namespace

ZeroCentredRmsNorm::ZeroCentredRmsNorm(const at::Tensor& weight, double eps)
    : weight_(weight.to(at::kFloat)), eps_(eps) {}

at::Tensor ZeroCentredRmsNorm::Forward(const at::Tensor& x) const {
  // Scaled in float32 before the cast back, as the reference does (not Llama's order).
  return (NormalisedFloat32(x, eps_) * (weight_ + 1.0)).to(x.scalar_type());
}

GatedRmsNorm::GatedRmsNorm(at::Tensor weight, double eps) : weight_(std::move(weight)), eps_(eps) {}

at::Tensor GatedRmsNorm::Forward(const at::Tensor& x, const at::Tensor& gate) const {
  const at::Tensor normed = weight_ * NormalisedFloat32(x, eps_).to(x.scalar_type());
  return (normed * at::silu(gate.to(at::kFloat))).to(x.scalar_type());
}

}  // namespace specd::model
