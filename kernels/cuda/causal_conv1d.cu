#include <cuda_bf16.h>

#include <algorithm>

#include "kernels/cuda/causal_conv1d.h"
#include "kernels/cuda/element_access.cuh"

namespace specd::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// One thread per output element, the taps summed oldest first as the reference adds them.
template <typename T, typename W>
__global__ void __launch_bounds__(kThreads)
    CausalConv1dKernel(const T* __restrict__ x, const W* __restrict__ weight,
                       const T* __restrict__ state, T* __restrict__ out, CausalConv1dArgs args) {
  const int64_t history = args.taps - 1;
  for (int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x; i < args.tokens * args.channels;
       i += int64_t{gridDim.x} * kThreads) {
    const int64_t token = i / args.channels, channel = i % args.channels;
    float sum = 0.0f;
    for (int64_t j = 0; j < args.taps; ++j) {
      // Row token + j of [state ‖ x].
      const int64_t row = token + j;
      const float input = row < history ? ToFloat(state[row * args.channels + channel])
                                        : ToFloat(x[(row - history) * args.channels + channel]);
      sum += input * ToFloat(weight[channel * args.taps + j]);
    }
    out[i] = FromFloat<T>(sum);
  }
}

template <typename T, typename W>
cudaError_t Launch(const CausalConv1dArgs& args, cudaStream_t stream) {
  const int64_t elements = args.tokens * args.channels;
  const unsigned blocks =
      static_cast<unsigned>(std::min<int64_t>((elements + kThreads - 1) / kThreads, 65535));
  CausalConv1dKernel<T, W><<<blocks, kThreads, 0, stream>>>(
      static_cast<const T*>(args.x), static_cast<const W*>(args.weight),
      static_cast<const T*>(args.state), static_cast<T*>(args.out), args);
  return cudaGetLastError();
}

}  // namespace

cudaError_t CausalConv1d(const CausalConv1dArgs& args, cudaStream_t stream) {
  if (args.tokens < 0 || args.channels <= 0 || args.taps <= 0) return cudaErrorInvalidValue;
  if (args.tokens == 0) return cudaSuccess;
  if (args.x == nullptr || args.weight == nullptr || args.out == nullptr ||
      (args.taps > 1 && args.state == nullptr)) {
    return cudaErrorInvalidValue;
  }
  const bool bf16 = args.type == ElementType::kBfloat16;
  const bool bf16_weight = args.weight_type == ElementType::kBfloat16;
  if (bf16) {
    return bf16_weight ? Launch<__nv_bfloat16, __nv_bfloat16>(args, stream)
                       : Launch<__nv_bfloat16, float>(args, stream);
  }
  return bf16_weight ? Launch<float, __nv_bfloat16>(args, stream)
                     : Launch<float, float>(args, stream);
}

}  // namespace specd::kernels::cuda
