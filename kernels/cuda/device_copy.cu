#include <cstdint>

#include "kernels/cuda/device_copy.h"

namespace specd::kernels::cuda {
namespace {

__global__ void CopyVec4(int4* __restrict__ dst, const int4* __restrict__ src, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    dst[i] = src[i];
  }
}

}  // namespace

cudaError_t LaunchDeviceCopy(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  if (bytes % sizeof(int4) != 0 || reinterpret_cast<std::uintptr_t>(dst) % sizeof(int4) != 0 ||
      reinterpret_cast<std::uintptr_t>(src) % sizeof(int4) != 0) {
    return cudaErrorInvalidValue;
  }
  const std::size_t n = bytes / sizeof(int4);
  if (n == 0) return cudaSuccess;
  int device = 0, sms = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
      e != cudaSuccess) {
    return e;
  }
  constexpr int kThreads = 256;
  // A few resident blocks per SM keep enough loads in flight to saturate HBM.
  const std::size_t wanted = (n + kThreads - 1) / kThreads;
  const int blocks =
      static_cast<int>(std::min<std::size_t>(wanted, static_cast<std::size_t>(sms) * 8));
  CopyVec4<<<blocks, kThreads, 0, stream>>>(static_cast<int4*>(dst), static_cast<const int4*>(src),
                                            n);
  return cudaGetLastError();
}

}  // namespace specd::kernels::cuda
