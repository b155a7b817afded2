#include "common/model/plain_rms_norm.h"

#include <ATen/ATen.h>

#include <utility>

namespace specd::model {

PlainRmsNorm::PlainRmsNorm(at::Tensor weight, double eps) : weight_(std::move(weight)), eps_(eps) {}

at::Tensor PlainRmsNorm::Forward(const at::Tensor& x) const {
  const at::Tensor x32 = x.to(at::kFloat);
  const at::Tensor normed = x32 * at::rsqrt(x32.square().mean(-1, /*keepdim=*/true) + eps_);
  // transformers' Qwen3RMSNorm casts back before scaling: w · normed.to(input dtype).
  return (weight_ * normed.to(x.scalar_type())).to(x.scalar_type());
}

}  // namespace specd::model
