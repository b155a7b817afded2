#pragma once
// A Linear that trains a float weight W on a frozen INT4 grid, for quantization-aware
// distillation (QAD). Every forward runs W through the grid's fake quantizer
//   Q(W) = s · (clamp(round(W / s) + z, -8, 7) - z)      s, z: the scale and zero point of the
//                                                          element's group (z = 0 symmetric)
// with a straight-through gradient, and Pack rounds W back onto the same grid: the trained layer
// ships with the scales and zero points it started from, as the codes Q(W) stands for.
#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "common/int4/packed_int4_weight.h"

namespace specd::model {

class FakeQuantLinear {
 public:
  // W starts as the dequantized weight, float32 [N, K] and requiring grad; the scales and zero
  // points become frozen float32 tensors [N, K], one per element (act-order group_index
  // included), so the forward needs no gather.
  static absl::StatusOr<FakeQuantLinear> FromPacked(const quant::PackedInt4Weight& packed);

  // y = x Q(W)ᵀ, [..., K] -> [..., N]. The value is Q(W)'s exactly; the gradient reaches W
  // unchanged (plain STE: identity everywhere, also where a code clamps), so dL/dW = dL/dQ(W),
  // which keeps a weight pushed past the grid's end trainable back into it.
  at::Tensor Forward(const at::Tensor& x) const;

  // W, the parameter an optimizer updates.
  at::Tensor& weight() { return weight_; }
  const at::Tensor& weight() const { return weight_; }
  at::Tensor QuantizedWeight() const;  // Q(W) [N, K], without grad

  // W rounded onto the original grid (scales, zero points, group index and scale dtype kept):
  // the codes Q(W) stands for. A non-finite W is an error.
  absl::StatusOr<quant::PackedInt4Weight> Pack() const;

 private:
  FakeQuantLinear() = default;
  at::Tensor Codes() const;  // [N, K] float32, each in [-8, 7]

  quant::Int4Grid grid_;
  at::Tensor weight_;
  at::Tensor scale_;  // [N, K]
  at::Tensor zero_;   // [N, K]; undefined when symmetric
};

}  // namespace specd::model
