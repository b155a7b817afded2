#pragma once
// Rotary position embedding, rotate-half style, on the GPU (common/model/ops/ops.h has the maths):
// one kernel where LibTorch's composition narrows, negates, concatenates and multiplies. Each sum
// and product is rounded to the element type where the reference rounds it.
//
// Row-major, one element type for all: x and out [tokens, heads, head_dim]; cos, sin [tokens,
// rotary_dim] (rotary_dim even, ≤ head_dim; the rest of each head passes through).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/element_type.h"

namespace specd::kernels::cuda {

struct RotaryArgs {
  ElementType type = ElementType::kFloat32;
  const void* x = nullptr;
  const void* cos = nullptr;
  const void* sin = nullptr;
  void* out = nullptr;
  int64_t tokens = 0;
  int64_t heads = 0;
  int64_t head_dim = 0;
  int64_t rotary_dim = 0;
};

// cudaErrorInvalidValue for a null pointer or a bad shape, else the launch status.
cudaError_t Rotary(const RotaryArgs& args, cudaStream_t stream);

}  // namespace specd::kernels::cuda
