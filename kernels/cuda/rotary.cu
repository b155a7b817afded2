#include <cuda_bf16.h>

#include <algorithm>

#include "kernels/cuda/element_access.cuh"
#include "kernels/cuda/rotary.h"

namespace specd::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// One thread per output element: x·cos + rotate_half(x)·sin on the rotary dims, each product and
// the sum rounded to T, as the reference's three tensor ops round them.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    RotaryKernel(const T* __restrict__ x, const T* __restrict__ cos, const T* __restrict__ sin,
                 T* __restrict__ out, RotaryArgs args) {
  const int64_t elements = args.tokens * args.heads * args.head_dim;
  for (int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x; i < elements;
       i += int64_t{gridDim.x} * kThreads) {
    const int64_t d = i % args.head_dim, token = i / (args.heads * args.head_dim);
    if (d >= args.rotary_dim) {
      out[i] = x[i];
      continue;
    }
    const int64_t half = args.rotary_dim / 2, angle = token * args.rotary_dim + d;
    const float rotated = d < half ? -ToFloat(x[i + half]) : ToFloat(x[i - half]);
    const float sum =
        Rounded<T>(ToFloat(x[i]) * ToFloat(cos[angle])) + Rounded<T>(rotated * ToFloat(sin[angle]));
    out[i] = FromFloat<T>(sum);
  }
}

template <typename T>
cudaError_t Launch(const RotaryArgs& args, cudaStream_t stream) {
  const int64_t elements = args.tokens * args.heads * args.head_dim;
  const unsigned blocks =
      static_cast<unsigned>(std::min<int64_t>((elements + kThreads - 1) / kThreads, 65535));
  RotaryKernel<T><<<blocks, kThreads, 0, stream>>>(
      static_cast<const T*>(args.x), static_cast<const T*>(args.cos),
      static_cast<const T*>(args.sin), static_cast<T*>(args.out), args);
  return cudaGetLastError();
}

}  // namespace

cudaError_t Rotary(const RotaryArgs& args, cudaStream_t stream) {
  if (args.tokens < 0 || args.heads < 0 || args.head_dim <= 0 || args.rotary_dim <= 0 ||
      args.rotary_dim % 2 != 0 || args.rotary_dim > args.head_dim) {
    return cudaErrorInvalidValue;
  }
  if (args.tokens == 0 || args.heads == 0) return cudaSuccess;
  if (args.x == nullptr || args.cos == nullptr || args.sin == nullptr || args.out == nullptr) {
    return cudaErrorInvalidValue;
  }
  return args.type == ElementType::kBfloat16 ? Launch<__nv_bfloat16>(args, stream)
                                             : Launch<float>(args, stream);
}

}  // namespace specd::kernels::cuda
