#pragma once
// A bias-free projection y = x Wᵀ. The one place a layer multiplies by a weight matrix, so
// quantized variants (W4A16) can replace the dense one without touching the layers.
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace specd::model {

// y = x Wᵀ for a weight [out, in]. A single row (a decode step) takes a matrix-vector product:
// BLAS sgemm with one row first packs (copies) the whole weight, which makes a memory-bound step
// move about three times the weight's bytes.
at::Tensor Project(const at::Tensor& x, const at::Tensor& weight);

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
