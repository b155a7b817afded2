#include "common/model/linear.h"

#include <ATen/ATen.h>

namespace specd::model {

at::Tensor Linear::Forward(const at::Tensor& x) const { return at::linear(x, weight_); }

}  // namespace specd::model
