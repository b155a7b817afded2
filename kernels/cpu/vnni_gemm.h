#pragma once
// y = x · Wᵀ for an INT4 weight on int8-quantized activations (W4A8): AVX-512 VNNI multiplies 64
// weight × activation byte pairs per instruction against the 16 of a float32 FMA, which is what a
// verify block, batched decode or a prefill chunk needs (the exact W4A16 kernel is bound by its
// FMAs from a few rows on). Not exact: activations are rounded per row and block of 32 columns to
// int8 on the block's absolute maximum, as llama.cpp's Q8_0 does (tests state the error).
//
// Weight layout, prepared at load (RepackForW4A8): blocks of 16 output rows; per block and 8
// columns, 64 bytes whose byte 4r + c holds row r's column c in its low nibble and column 4 + c
// in its high one, so that a 32-bit lane carries one row's four consecutive columns and one
// instruction advances 16 outputs over 4 columns, with no horizontal sum. Per block and group,
// the 16 rows' scales s and offsets s · (8 + zero): a weight is (nibble − 8 − zero) · s.
#include <cstdint>
#include <vector>

#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/w4a16_gemm.h"

namespace specd::kernels::cpu {

inline constexpr int64_t kW4A8RowBlock = 16;
inline constexpr int64_t kW4A8ActivationBlock = 32;  // columns per activation scale

struct Int4VnniMatrix {
  std::vector<uint8_t> nibbles;  // [row blocks][cols / 8][64]
  std::vector<float> scales;     // [row blocks][groups][16]
  std::vector<float> offsets;    // [row blocks][groups][16]
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t group_size = 0;  // a multiple of kW4A8ActivationBlock
};

// Whether this CPU runs W4A8Gemm: AVX-512 F, BW and VNNI.
bool CpuHasW4A8();

// `w` in the layout above; rows past the last block's end are zeros.
Int4VnniMatrix RepackForW4A8(const Int4Matrix& w);

// y [rows, w.rows] ≈ x [rows, w.cols] · Wᵀ, row-major float32. Needs CpuHasW4A8().
void W4A8Gemm(const float* x, int64_t rows, const Int4VnniMatrix& w, float* y,
              ThreadPool& pool = ThreadPool::Shared());

}  // namespace specd::kernels::cpu
