#pragma once
// The per-ISA bodies behind VnniGemm, each computing row blocks [begin, end) of y for every x row,
// and the int8 activations they share.
#include <cstdint>
#include <vector>

#include "kernels/cpu/vnni_gemm.h"

namespace specd::kernels::cpu::internal {

// x rounded to int8 per row and activation block: x ≈ scale · q.
struct QuantizedRows {
  std::vector<int8_t> q;      // [rows, cols]
  std::vector<float> scales;  // [rows, cols / block]
  std::vector<float> sums;    // [rows, groups]: Σ over the group's blocks of scale · Σ q
};

// Rounds rows [begin, end) of x [rows, cols] into `out` in blocks of `block` columns (a multiple
// of 32 dividing group_size), already sized for every row. Needs AVX2 (so every body's CPU has
// it).
void QuantizeRowsAvx2(const float* x, int64_t cols, int64_t group_size, int64_t block,
                      int64_t begin, int64_t end, QuantizedRows& out);

// For codes of kBits (4 or 8) bits. Needs AVX-512 F, BW and VNNI at run time.
template <int kBits>
void VnniRowBlocksAvx512(const QuantizedRows& x, int64_t rows, const VnniMatrix& w, int64_t begin,
                         int64_t end, float* y);
// Needs AVX2 and FMA at run time.
template <int kBits>
void VnniRowBlocksAvx2(const QuantizedRows& x, int64_t rows, const VnniMatrix& w, int64_t begin,
                       int64_t end, float* y);

}  // namespace specd::kernels::cpu::internal
