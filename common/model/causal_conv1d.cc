#include "common/model/causal_conv1d.h"

#include <ATen/ATen.h>

namespace specd::model {

at::Tensor CausalConv1d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& state) {
  // Summed in float32, as a convolution kernel accumulates, whatever the activation dtype.
  const at::Tensor window = at::cat({state, x}, 0).to(at::kFloat);  // [K − 1 + T, C]
  const at::Tensor taps = weight.to(at::kFloat);
  const int64_t length = x.size(0);
  at::Tensor out = window.narrow(0, 0, length) * taps.select(1, 0);
  for (int64_t j = 1; j < taps.size(1); ++j) {
    out.addcmul_(window.narrow(0, j, length), taps.select(1, j));
  }
  return out.to(x.scalar_type());
}

at::Tensor ConvStateAfter(const at::Tensor& state, const at::Tensor& x) {
  const at::Tensor window = at::cat({state, x}, 0);
  return window.narrow(0, window.size(0) - state.size(0), state.size(0));
}

}  // namespace specd::model
