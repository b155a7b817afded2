#pragma once
// The two RMSNorm flavours of Qwen3.5. Statistics are float32 whatever the activation dtype.
#include <ATen/core/Tensor.h>

namespace specd::model {

// y = x / rms(x) · (1 + w): the weight is stored centred on zero. Used by the layer norms, the
// final norm and the attention q/k norms.
class ZeroCentredRmsNorm {
 public:
  ZeroCentredRmsNorm() = default;
  ZeroCentredRmsNorm(const at::Tensor& weight, double eps);  // weight float32 [dim]

  at::Tensor Forward(const at::Tensor& x) const;  // normalises the last dimension

 private:
  at::Tensor weight_;  // w, float32 (the parameter a trainer updates)
  double eps_ = 0;
};

// y = (x / rms(x) · w) · silu(z) with a plain weight: the Gated DeltaNet output norm, applied
// per value head before the gate.
class GatedRmsNorm {
 public:
  GatedRmsNorm() = default;
  GatedRmsNorm(at::Tensor weight, double eps);  // weight [head_dim] in the model dtype

  at::Tensor Forward(const at::Tensor& x, const at::Tensor& gate) const;

 private:
  at::Tensor weight_;
  double eps_ = 0;
};

}  // namespace specd::model
