#include "common/model/mlp.h"

#include <ATen/ATen.h>

#include "common/model/ops/ops.h"

namespace specd::model {

at::Tensor SwiGluMlp::Forward(const at::Tensor& x) const {
  return down_proj.Forward(ops::SiluMul(gate_proj.Forward(x), up_proj.Forward(x)));
}

}  // namespace specd::model
