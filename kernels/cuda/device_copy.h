#pragma once
// Device-to-device copy with 16-byte vector loads: the GPU streaming floor that W4A16 kernels
// quote their achieved bandwidth against, next to cudaMemcpy in the same run.
#include <cuda_runtime.h>

#include <cstddef>

namespace specd::kernels::cuda {

// Copies `bytes` between non-overlapping device buffers on `stream`. Pointers must be 16-byte
// aligned and `bytes` a multiple of 16 (every allocation from cudaMalloc is 256-byte aligned).
cudaError_t LaunchDeviceCopy(void* dst, const void* src, std::size_t bytes, cudaStream_t stream);

}  // namespace specd::kernels::cuda
