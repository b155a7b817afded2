#include "common/model/linear.h"

#include <ATen/ATen.h>

#include <vector>

namespace specd::model {

at::Tensor Project(const at::Tensor& x, const at::Tensor& weight) {
  if (x.numel() != x.size(-1)) return at::linear(x, weight);
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.size(0);
  return at::mv(weight, x.reshape({-1})).view(shape);
}

at::Tensor Linear::Forward(const at::Tensor& x) const { return Project(x, weight_); }

}  // namespace specd::model
