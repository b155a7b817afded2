#pragma once
// A bias-free projection y = x Wᵀ. The one place a layer multiplies by a weight matrix, so
// quantized variants (W4A16) can replace the dense one without touching the layers.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>

#include "common/int4/int4_kernel_weight.h"
#include "common/model/fake_quant_linear.h"
#include "common/model/ops/int4_tensors.h"

namespace specd::model {

// Dense (a weight tensor), W4A16 (INT4 codes laid out for the op table's W4A16 projection,
// never expanded to a dense weight: in host memory for the CPU, in tensors on a GPU), or fake-quant
// (a float weight trained on a frozen INT4 grid, for QAD). Copies share the quantized weight. The
// module name (e.g. "model.layers.0.mlp.up_proj") is what a LinearInputTap reports inputs under.
class Linear {
 public:
  Linear() = default;
  Linear(std::string module, at::Tensor weight)  // weight [out, in]
      : module_(std::move(module)), weight_(std::move(weight)) {}
  Linear(std::string module, std::shared_ptr<const quant::Int4KernelWeight> int4)
      : module_(std::move(module)), int4_(std::move(int4)) {}
  Linear(std::string module, std::shared_ptr<const ops::Int4Tensors> int4)
      : module_(std::move(module)), int4_tensors_(std::move(int4)) {}
  Linear(std::string module, std::shared_ptr<const FakeQuantLinear> fake_quant)
      : module_(std::move(module)), fake_quant_(std::move(fake_quant)) {}

  at::Tensor Forward(const at::Tensor& x) const;  // [..., in] -> [..., out]

  bool quantized() const { return int4_ != nullptr || int4_tensors_ != nullptr; }
  int64_t in_features() const;
  int64_t out_features() const;
  const at::Tensor& weight() const { return weight_; }  // undefined unless dense
  const std::string& module() const { return module_; }

 private:
  std::string module_;
  at::Tensor weight_;
  std::shared_ptr<const quant::Int4KernelWeight> int4_;
  std::shared_ptr<const ops::Int4Tensors> int4_tensors_;
  std::shared_ptr<const FakeQuantLinear> fake_quant_;
};

}  // namespace specd::model
