#include "common/model/linear.h"

#include <ATen/ATen.h>

#include "common/model/linear_input_tap.h"
#include "common/model/ops/ops.h"

namespace specd::model {

int64_t Linear::in_features() const {
  if (quantized()) return int4_->cols();
  return (fake_quant_ ? fake_quant_->weight() : weight_).size(1);
}

int64_t Linear::out_features() const {
  if (quantized()) return int4_->rows();
  return (fake_quant_ ? fake_quant_->weight() : weight_).size(0);
}

at::Tensor Linear::Forward(const at::Tensor& x) const {
  LinearInputTap::Observe(module_, x);
  if (fake_quant_) return fake_quant_->Forward(x);
  if (!quantized()) return ops::Project(x, weight_);
  return ops::ProjectInt4(x, *int4_);
}

}  // namespace specd::model
