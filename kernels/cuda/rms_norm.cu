#include <cuda_bf16.h>

#include <type_traits>

#include "kernels/cuda/element_access.cuh"
#include "kernels/cuda/rms_norm.h"

namespace specd::kernels::cuda {
namespace {

constexpr int kWarps = 8;  // rows per block

// T: x, gate and out; W: the weight. The reference's roundings, in its order: LibTorch multiplies
// in the promoted type of its operands, so w · round(x·r) is rounded again only when both are bf16.
template <NormKind kKind, typename T, typename W>
__global__ void __launch_bounds__(kWarps * 32)
    RmsNormKernel(const T* __restrict__ x, const T* __restrict__ gate, const W* __restrict__ weight,
                  T* __restrict__ out, int64_t rows, int dim, float eps) {
  const int lane = threadIdx.x % 32;
  const int64_t row = int64_t{blockIdx.x} * kWarps + threadIdx.x / 32;
  if (row >= rows) return;
  const T* x_row = x + row * dim;
  float sum_of_squares = 0.0f;
  for (int i = lane; i < dim; i += 32) {
    const float value = ToFloat(x_row[i]);
    sum_of_squares += value * value;
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    sum_of_squares += __shfl_xor_sync(0xffffffffu, sum_of_squares, offset);
  }
  const float r = rsqrtf(sum_of_squares / static_cast<float>(dim) + eps);
  for (int i = lane; i < dim; i += 32) {
    const float normed = ToFloat(x_row[i]) * r;
    const float w = ToFloat(weight[i]);
    float y;
    if constexpr (kKind == NormKind::kZeroCentred) {
      y = normed * (w + 1.0f);
    } else {
      y = w * Rounded<T>(normed);
      if constexpr (kKind == NormKind::kGated) {
        if constexpr (std::is_same_v<T, __nv_bfloat16> && std::is_same_v<W, __nv_bfloat16>) {
          y = Rounded<__nv_bfloat16>(y);
        }
        const float g = ToFloat(gate[row * dim + i]);
        y *= g / (1.0f + expf(-g));
      }
    }
    out[row * dim + i] = FromFloat<T>(y);
  }
}

template <NormKind kKind, typename T, typename W>
cudaError_t Launch(const RmsNormArgs& args, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((args.rows + kWarps - 1) / kWarps);
  RmsNormKernel<kKind, T, W><<<blocks, kWarps * 32, 0, stream>>>(
      static_cast<const T*>(args.x), static_cast<const T*>(args.gate),
      static_cast<const W*>(args.weight), static_cast<T*>(args.out), args.rows,
      static_cast<int>(args.dim), args.eps);
  return cudaGetLastError();
}

template <NormKind kKind>
cudaError_t LaunchFor(const RmsNormArgs& args, cudaStream_t stream) {
  const bool bf16 = args.type == ElementType::kBfloat16;
  const bool bf16_weight = args.weight_type == ElementType::kBfloat16;
  if (bf16) {
    return bf16_weight ? Launch<kKind, __nv_bfloat16, __nv_bfloat16>(args, stream)
                       : Launch<kKind, __nv_bfloat16, float>(args, stream);
  }
  return bf16_weight ? Launch<kKind, float, __nv_bfloat16>(args, stream)
                     : Launch<kKind, float, float>(args, stream);
}

}  // namespace

cudaError_t RmsNorm(const RmsNormArgs& args, cudaStream_t stream) {
  if (args.rows < 0 || args.dim <= 0 || args.dim > (1 << 30) || args.weight == nullptr ||
      (args.rows > 0 && (args.x == nullptr || args.out == nullptr)) ||
      (args.kind == NormKind::kGated && args.rows > 0 && args.gate == nullptr)) {
    return cudaErrorInvalidValue;
  }
  if (args.rows == 0) return cudaSuccess;
  switch (args.kind) {
    case NormKind::kZeroCentred:
      return LaunchFor<NormKind::kZeroCentred>(args, stream);
    case NormKind::kPlain:
      return LaunchFor<NormKind::kPlain>(args, stream);
    case NormKind::kGated:
      return LaunchFor<NormKind::kGated>(args, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace specd::kernels::cuda
