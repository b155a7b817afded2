#pragma once
// A bias-free projection y = x Wᵀ. The one place a layer multiplies by a weight matrix, so
// quantized variants (W4A16) can replace the dense one without touching the layers.
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace specd::model {

class Linear {
 public:
  Linear() = default;
  explicit Linear(at::Tensor weight) : weight_(std::move(weight)) {}  // [out, in]

  at::Tensor Forward(const at::Tensor& x) const;  // [..., in] -> [..., out]

  int64_t in_features() const { return weight_.size(1); }
  int64_t out_features() const { return weight_.size(0); }
  const at::Tensor& weight() const { return weight_; }

 private:
  at::Tensor weight_;
};

}  // namespace specd::model
