#include "common/model/linear.h"

#include <ATen/ATen.h>

#include "common/model/linear_input_tap.h"
#include "common/model/ops/ops.h"

namespace specd::model {

int64_t Linear::in_features() const {
  if (int4_tensors_) return int4_tensors_->cols();
  if (int4_) return int4_->cols();
  return (fake_quant_ ? fake_quant_->weight() : weight_).size(1);
}

int64_t Linear::out_features() const {
  if (int4_tensors_) return int4_tensors_->rows();
  if (int4_) return int4_->rows();
  return (fake_quant_ ? fake_quant_->weight() : weight_).size(0);
}

at::Tensor Linear::Forward(const at::Tensor& x) const {
  LinearInputTap::Observe(module_, x);
  if (fake_quant_) return fake_quant_->Forward(x);
  if (int4_tensors_) return ops::ProjectInt4(x, *int4_tensors_);
  if (int4_) return ops::ProjectInt4(x, *int4_);
  return ops::Project(x, weight_);
}

}  // namespace specd::model
