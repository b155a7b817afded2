#include "common/model/plain_rms_norm.h"

#include <ATen/ATen.h>

#include <utility>

#include "common/model/ops/ops.h"

namespace specd::model {

PlainRmsNorm::PlainRmsNorm(at::Tensor weight, double eps) : weight_(std::move(weight)), eps_(eps) {}

at::Tensor PlainRmsNorm::Forward(const at::Tensor& x) const {
  return ops::RmsNorm(x, weight_, eps_, ops::NormWeight::kPlain);
}

}  // namespace specd::model
