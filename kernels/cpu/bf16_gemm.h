#pragma once
// y = x · Wᵀ for a weight of 4-bit codes in the VNNI layout (vnni_gemm.h) on activations rounded
// to bf16, summed in float32: W4A16 as a GPU serves it, near-exact where W4A8 rounds activations
// to 8 bits. AVX512-BF16 multiplies 32 bf16 pairs into 16 float32 sums per instruction, twice the
// exact kernel's FMA (w4a16_gemm.h) and with a quarter of its unpacking per weight, so one row
// (decode) is bound by memory rather than by instructions.
//
// A nibble c becomes a bf16 weight with one OR: the bits 0x4300 | c stand exactly for 128 + c
// (the exponent of 128, c in the mantissa), and the bias leaves with the zero code: per group,
// Σ (128 + c) · x − (128 + z) · Σ x. Its cancellation costs about 7 of float32's 24 bits, far
// below the 8 that rounding x to bf16 leaves.
#include <cstdint>

#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/vnni_gemm.h"

namespace specd::kernels::cpu {

// Whether this CPU runs Bf16Gemm: AVX-512 F, BW, VL and BF16 (and F16C).
bool CpuHasBf16Gemm();

// y [rows, w.rows] = x [rows, w.cols] · Wᵀ, row-major float32, with x rounded to bf16 (to nearest
// even) and float32 sums, for `w` of 4-bit codes. Needs CpuHasBf16Gemm().
void Bf16Gemm(const float* x, int64_t rows, const VnniMatrix& w, float* y,
              ThreadPool& pool = ThreadPool::Shared());

}  // namespace specd::kernels::cpu
