#include "common/model/mlp.h"

#include <ATen/ATen.h>

namespace specd::model {

at::Tensor SwiGluMlp::Forward(const at::Tensor& x) const {
  return down_proj.Forward(at::silu(gate_proj.Forward(x)) * up_proj.Forward(x));
}

}  // namespace specd::model
