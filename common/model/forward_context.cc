#include "common/model/forward_context.h"

#include <ATen/ATen.h>

namespace specd::model {

std::vector<at::Tensor> ForwardContext::GraphInputs(const at::Tensor& first,
                                                    c10::Device device) const {
  return {first, at::tensor(Positions(), at::kLong).to(device), angles.cos, angles.sin};
}

ForwardContext ForwardContext::Replaying(std::span<const at::Tensor> inputs) const {
  ForwardContext replaying = *this;
  replaying.positions = inputs[1];
  replaying.angles = {.cos = inputs[2], .sin = inputs[3]};
  return replaying;
}

}  // namespace specd::model
