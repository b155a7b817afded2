#pragma once
// Device helpers of the elementwise kernels: loads widened to float32, stores rounded to their
// type, and a value rounded as a tensor of that type would hold it (where LibTorch's composition
// rounds between two ops, a fused kernel rounds there too).
#include <cuda_bf16.h>

namespace specd::kernels::cuda {

__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ float FromFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

template <typename T>
__device__ __forceinline__ float Rounded(float x) {
  return ToFloat(FromFloat<T>(x));
}

}  // namespace specd::kernels::cuda
