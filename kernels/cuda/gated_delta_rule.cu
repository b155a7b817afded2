#include <climits>

#include "kernels/cuda/gated_delta_rule.h"

namespace specd::kernels::cuda {
namespace {

// The columns of a head's state are independent: column j of S_t depends only on column j of
// S_{t−1}, k_t, q_t and v_t[j]. So a warp owns kColumnsPerWarp columns, each lane holding
// kRowsPerLane rows of each (rows lane, lane + 32, …), and a token's two dot products over the
// key dimension (kᵀS and qᵀS) are warp reductions, with no shared memory and no barrier.
constexpr int kColumnsPerWarp = 8;
constexpr int kWarps = 4;
constexpr int kColumnsPerBlock = kColumnsPerWarp * kWarps;
constexpr int kMaxKeyDim = 256;

__device__ __forceinline__ float WarpSum(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

template <int kRowsPerLane>
__global__ void __launch_bounds__(kWarps * 32)
    RecurrentGatedDeltaRuleKernel(DeltaRuleShape shape, const float* __restrict__ q,
                                  const float* __restrict__ k, const float* __restrict__ v,
                                  const float* __restrict__ g, const float* __restrict__ beta,
                                  const float* initial_state, float* final_state,
                                  float* __restrict__ out) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int head = blockIdx.y, heads = static_cast<int>(shape.heads);
  const int key_dim = static_cast<int>(shape.key_dim),
            value_dim = static_cast<int>(shape.value_dim);
  const int column0 = blockIdx.x * kColumnsPerBlock + warp * kColumnsPerWarp;
  if (column0 >= value_dim) return;
  const int64_t state_offset = int64_t{head} * key_dim * value_dim;

  // Visits this lane's elements of the head's state: rows lane, lane + 32, …, the warp's columns.
  const auto for_each_element = [&](auto&& visit) {
#pragma unroll
    for (int r = 0; r < kRowsPerLane; ++r) {
      const int row = lane + 32 * r;
#pragma unroll
      for (int c = 0; c < kColumnsPerWarp; ++c) {
        const int column = column0 + c;
        if (row < key_dim && column < value_dim) {
          visit(r, c, state_offset + int64_t{row} * value_dim + column);
        }
      }
    }
  };
  // Rows past key_dim and columns past value_dim hold 0 and are never stored.
  float s[kRowsPerLane][kColumnsPerWarp] = {};
  for_each_element([&](int r, int c, int64_t i) { s[r][c] = initial_state[i]; });

  for (int64_t t = 0; t < shape.tokens; ++t) {
    const int64_t token_head = t * heads + head;
    const float* k_t = k + token_head * key_dim;
    const float* q_t = q + token_head * key_dim;
    float k_rows[kRowsPerLane], q_rows[kRowsPerLane];
#pragma unroll
    for (int r = 0; r < kRowsPerLane; ++r) {
      const int row = lane + 32 * r;
      k_rows[r] = row < key_dim ? __ldg(k_t + row) : 0.0f;
      q_rows[r] = row < key_dim ? __ldg(q_t + row) : 0.0f;
    }
    const float decay = expf(__ldg(g + token_head)), b = __ldg(beta + token_head);

    // S ← exp(g)·S, then kᵀS: what the state remembers for k.
    float remembered[kColumnsPerWarp];
#pragma unroll
    for (int c = 0; c < kColumnsPerWarp; ++c) {
      float partial = 0.0f;
#pragma unroll
      for (int r = 0; r < kRowsPerLane; ++r) {
        s[r][c] *= decay;
        partial += k_rows[r] * s[r][c];
      }
      remembered[c] = partial;
    }
#pragma unroll
    for (int c = 0; c < kColumnsPerWarp; ++c) remembered[c] = WarpSum(remembered[c]);

    // S ← S + k ⊗ β(v − kᵀS), then o = qᵀS.
    const float* v_t = v + token_head * value_dim;
    float o[kColumnsPerWarp];
#pragma unroll
    for (int c = 0; c < kColumnsPerWarp; ++c) {
      const int column = column0 + c;
      const float value = column < value_dim ? __ldg(v_t + column) : 0.0f;
      const float delta = (value - remembered[c]) * b;
      float partial = 0.0f;
#pragma unroll
      for (int r = 0; r < kRowsPerLane; ++r) {
        s[r][c] += k_rows[r] * delta;
        partial += q_rows[r] * s[r][c];
      }
      o[c] = partial;
    }
#pragma unroll
    for (int c = 0; c < kColumnsPerWarp; ++c) o[c] = WarpSum(o[c]);
    // Lane c writes column c: one coalesced store of the warp's columns.
    for (int c = 0; c < kColumnsPerWarp; ++c) {
      if (lane == c && column0 + c < value_dim) out[token_head * value_dim + column0 + c] = o[c];
    }
  }

  for_each_element([&](int r, int c, int64_t i) { final_state[i] = s[r][c]; });
}

using Kernel = void (*)(DeltaRuleShape, const float*, const float*, const float*, const float*,
                        const float*, const float*, float*, float*);

}  // namespace

bool DeltaRuleTakes(const DeltaRuleShape& shape) {
  return shape.tokens >= 0 && shape.heads > 0 && shape.heads <= 65535 && shape.key_dim > 0 &&
         shape.key_dim <= kMaxKeyDim && shape.value_dim > 0 && shape.value_dim <= INT_MAX / 2;
}

cudaError_t RecurrentGatedDeltaRule(const DeltaRuleShape& shape, const float* q, const float* k,
                                    const float* v, const float* g, const float* beta,
                                    const float* initial_state, float* final_state, float* out,
                                    cudaStream_t stream) {
  if (!DeltaRuleTakes(shape) || initial_state == nullptr || final_state == nullptr ||
      (shape.tokens > 0 && (q == nullptr || k == nullptr || v == nullptr || g == nullptr ||
                            beta == nullptr || out == nullptr))) {
    return cudaErrorInvalidValue;
  }
  // The fewest rows per lane that cover key_dim: registers are the kernel's only storage.
  const Kernel kernel = shape.key_dim <= 32    ? RecurrentGatedDeltaRuleKernel<1>
                        : shape.key_dim <= 64  ? RecurrentGatedDeltaRuleKernel<2>
                        : shape.key_dim <= 128 ? RecurrentGatedDeltaRuleKernel<4>
                                               : RecurrentGatedDeltaRuleKernel<8>;
  const dim3 grid(
      static_cast<unsigned>((shape.value_dim + kColumnsPerBlock - 1) / kColumnsPerBlock),
      static_cast<unsigned>(shape.heads));
  kernel<<<grid, kWarps * 32, 0, stream>>>(shape, q, k, v, g, beta, initial_state, final_state,
                                           out);
  return cudaGetLastError();
}

}  // namespace specd::kernels::cuda
