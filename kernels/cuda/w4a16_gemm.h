#pragma once
// y = x · Wᵀ on the GPU for an INT4 weight W that stays packed, sized for decode and verify steps
// (M = 1…32 rows): memory-bound, so one call reads each packed word once for all M rows and
// dequantizes it in registers right before a bf16 tensor-core MMA with float32 accumulation.
//
// Weight layout: compressed-tensors `pack-quantized`, as kernels/cpu/w4a16_gemm.h documents: row
// n, column k is the nibble at bits 4·(k % 8) of int32 word [n, k / 8], holding q + 8. Scales are
// bf16 as checkpoints store them; zero points int8 in q units, already unpacked to [N, K/G].
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace specd::kernels::cuda {

// Device pointers; the CUDA twin of kernels/cpu Int4Matrix.
struct Int4MatrixDevice {
  const int32_t* packed = nullptr;        // [rows, cols / 8]
  const __nv_bfloat16* scales = nullptr;  // [rows, cols / group_size]
  const int8_t* zero_points = nullptr;    // [rows, cols / group_size], q units; null: symmetric
  int64_t rows = 0;                       // N, output features
  int64_t cols = 0;                       // K, input features; a multiple of 8
  int64_t group_size = 0;                 // columns per scale; a multiple of 8 dividing cols
};

// y[m, n] = Σ_k x[m, k] · (q[n, k] - zero_point[n, g]) · scale[n, g], g = k / group_size, for x
// [rows, w.cols] and y [rows, w.rows], both row-major bf16; x must be 16-byte aligned. Each
// dequantized weight is rounded to bf16 (as DequantizeToBf16 writes it) before the float32
// accumulation. More than 32 rows run as slices of 32, each reading W again. Returns
// cudaErrorInvalidValue for a bad shape or pointer, else the launch status.
cudaError_t W4A16Gemm(const __nv_bfloat16* x, int64_t rows, const Int4MatrixDevice& w,
                      __nv_bfloat16* y, cudaStream_t stream);

// Reference: writes W dense, bf16((q - zero_point) · scale), row-major [w.rows, w.cols], for a
// cuBLAS GEMM to check W4A16Gemm against and to time it against. Same shape checks.
cudaError_t DequantizeToBf16(const Int4MatrixDevice& w, __nv_bfloat16* dense, cudaStream_t stream);

}  // namespace specd::kernels::cuda
