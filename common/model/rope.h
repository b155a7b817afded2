#pragma once
// Rotary position embedding on the first `rotary_dim` dims of each head (partial RoPE),
// rotate-half style. For text the model's multimodal M-RoPE has equal positions on all three
// axes, which reduces exactly to this 1-D form.
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "common/model/model_options.h"

namespace specd::model {

struct RotaryAngles {
  at::Tensor cos;  // [T, rotary_dim]
  at::Tensor sin;
};

class RotaryEmbedding {
 public:
  RotaryEmbedding() = default;
  RotaryEmbedding(int64_t rotary_dim, double theta, const ModelOptions& options);

  // Angles for absolute positions [start, start + count), in the model dtype on its device
  // (computed on the CPU).
  RotaryAngles Angles(int64_t start, int64_t count) const;
  // Angles for any absolute positions [T] (int64, on any device: they are read on the CPU), e.g.
  // blocks placed at training anchors.
  RotaryAngles Angles(const at::Tensor& positions) const;

 private:
  at::Tensor inv_freq_;  // [rotary_dim / 2], float32 on the CPU
  c10::Device device_ = c10::kCPU;
  c10::ScalarType dtype_ = c10::kFloat;
};

// x [T, heads, head_dim] rotated on its first rotary_dim dims (the angles' width; ops::Rotary);
// the rest of each head passes through.
at::Tensor ApplyRotary(const at::Tensor& x, const RotaryAngles& angles);

}  // namespace specd::model
