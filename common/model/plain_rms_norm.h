#pragma once
// Qwen3's RMSNorm with a plain weight, y = x / rms(x) · w (the DFlash drafter's norms), beside
// Qwen3.5's zero-centred flavours in rms_norm.h. Statistics are float32 whatever the dtype.
#include <ATen/core/Tensor.h>

namespace specd::model {

class PlainRmsNorm {
 public:
  PlainRmsNorm() = default;
  PlainRmsNorm(at::Tensor weight, double eps);  // weight float32 [dim]

  at::Tensor Forward(const at::Tensor& x) const;  // normalises the last dimension

 private:
  at::Tensor weight_;
  double eps_ = 0;
};

}  // namespace specd::model
