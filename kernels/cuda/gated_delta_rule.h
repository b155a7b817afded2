#pragma once
// The gated delta rule token by token on the GPU (common/model/ops/ops.h has the maths), fused:
// a head's state stays in registers over all the tokens of a call, read and written once per
// call, not per token. It serves decode steps, verify blocks and prefill alike, so every path
// makes the same arithmetic per token (as kernels/cpu's twin does).
//
// Row-major float32 device pointers: q, k [tokens, heads, key_dim]; v [tokens, heads,
// value_dim]; g, beta [tokens, heads]; initial_state, final_state [heads, key_dim, value_dim]
// (the same pointer for an update in place); out [tokens, heads, value_dim].
#include <cuda_runtime.h>

#include <cstdint>

namespace specd::kernels::cuda {

struct DeltaRuleShape {
  int64_t tokens = 0;
  int64_t heads = 0;
  int64_t key_dim = 0;
  int64_t value_dim = 0;
};

// Whether the kernel takes this shape: key_dim up to 256 (a warp holds a column of the state).
bool DeltaRuleTakes(const DeltaRuleShape& shape);

// cudaErrorInvalidValue for a shape the kernel does not take or a null pointer, else the launch
// status.
cudaError_t RecurrentGatedDeltaRule(const DeltaRuleShape& shape, const float* q, const float* k,
                                    const float* v, const float* g, const float* beta,
                                    const float* initial_state, float* final_state, float* out,
                                    cudaStream_t stream);

}  // namespace specd::kernels::cuda
