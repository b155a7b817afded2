#pragma once
// RMS norms over the last dimension on the GPU (common/model/ops/ops.h has the maths), each one
// kernel where LibTorch's composition launches half a dozen: a warp per row, float32 statistics,
// rounding where the reference rounds. Rows of x and out (and gate) are `dim` contiguous values;
// x, gate and out share one element type, float32 or bf16; the weight [dim] is float32 or bf16.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/element_type.h"

namespace specd::kernels::cuda {

enum class NormKind {
  kZeroCentred,  // x·r·(1 + w), in float32, rounded once (Qwen3.5's norms)
  kPlain,        // w · round(x·r) (Qwen3's: the DFlash drafter)
  kGated,        // (w · round(x·r)) · silu(gate) (the Gated DeltaNet's output norm)
};

struct RmsNormArgs {
  NormKind kind = NormKind::kZeroCentred;
  ElementType type = ElementType::kFloat32;         // x, gate, out
  ElementType weight_type = ElementType::kFloat32;  // weight
  const void* x = nullptr;
  const void* gate = nullptr;  // kGated only
  const void* weight = nullptr;
  void* out = nullptr;
  int64_t rows = 0;
  int64_t dim = 0;
  float eps = 1e-6f;
};

// cudaErrorInvalidValue for a null pointer or a bad shape, else the launch status.
cudaError_t RmsNorm(const RmsNormArgs& args, cudaStream_t stream);

}  // namespace specd::kernels::cuda
