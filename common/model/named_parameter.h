#pragma once
// A weight a trainer updates, under the name a checkpoint stores it by. The tensor is the very
// one the model's forward reads (shared storage), so an optimizer stepping it in place trains
// the model.
#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

#include "common/model/fake_quant_linear.h"

namespace specd::model {

struct NamedParameter {
  std::string name;  // full checkpoint name, e.g. "model.layers.0.mlp.up_proj.weight"
  at::Tensor tensor;
  // Set for a W4A16 Linear's latent weight (QAD): it ships as the codes of its frozen grid.
  std::shared_ptr<FakeQuantLinear> fake_quant;
};

}  // namespace specd::model
