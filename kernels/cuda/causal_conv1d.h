#pragma once
// The Gated DeltaNet's depthwise causal convolution on the GPU (common/model/ops/ops.h has the
// maths): one kernel where LibTorch's composition concatenates, widens and accumulates tap by tap.
// Sums in float32, the output rounded once to its type.
//
// Row-major: x and out [tokens, channels], state [taps − 1, channels] (the previous inputs, oldest
// first; not changed), all of one element type; weight [channels, taps] of its own.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/element_type.h"

namespace specd::kernels::cuda {

struct CausalConv1dArgs {
  ElementType type = ElementType::kFloat32;         // x, state, out
  ElementType weight_type = ElementType::kFloat32;  // weight
  const void* x = nullptr;
  const void* weight = nullptr;
  const void* state = nullptr;
  void* out = nullptr;
  int64_t tokens = 0;
  int64_t channels = 0;
  int64_t taps = 0;
};

// cudaErrorInvalidValue for a null pointer or a bad shape, else the launch status.
cudaError_t CausalConv1d(const CausalConv1dArgs& args, cudaStream_t stream);

}  // namespace specd::kernels::cuda
