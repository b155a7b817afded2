#pragma once
// SwiGLU feed-forward: down(silu(gate(x)) · up(x)).
#include <ATen/core/Tensor.h>

#include "common/model/linear.h"

namespace specd::model {

struct SwiGluMlp {
  Linear gate_proj;
  Linear up_proj;
  Linear down_proj;

  at::Tensor Forward(const at::Tensor& x) const;
};

}  // namespace specd::model
