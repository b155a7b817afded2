#include "common/model/rms_norm.h"

#include <ATen/ATen.h>

#include <utility>

#include "common/model/ops/ops.h"

namespace specd::model {

ZeroCentredRmsNorm::ZeroCentredRmsNorm(const at::Tensor& weight, double eps)
    : weight_(weight.to(at::kFloat)), eps_(eps) {}

at::Tensor ZeroCentredRmsNorm::Forward(const at::Tensor& x) const {
  return ops::RmsNorm(x, weight_, eps_, ops::NormWeight::kZeroCentred);
}

GatedRmsNorm::GatedRmsNorm(at::Tensor weight, double eps) : weight_(std::move(weight)), eps_(eps) {}

at::Tensor GatedRmsNorm::Forward(const at::Tensor& x, const at::Tensor& gate) const {
  return ops::GatedRmsNorm(x, gate, weight_, eps_);
}

}  // namespace specd::model
