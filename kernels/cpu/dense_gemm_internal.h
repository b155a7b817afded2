#pragma once
// The per-ISA bodies behind DenseGemm, each computing W rows [n_begin, n_end) of y for every x
// row, and what they share.
#include <cstdint>
#include <cstring>

#include "kernels/cpu/dense_gemm.h"
#include "kernels/cpu/row_tiles.h"

namespace specd::kernels::cpu::internal {

constexpr int kDenseTile = kRowTile;  // W rows per tile, as many as x rows

// Column k of a weight row as float32 (a bf16's bits are a float32's top half).
template <bool kBf16>
inline float WeightAt(const void* row, int64_t k) {
  if constexpr (kBf16) {
    const uint32_t bits = static_cast<uint32_t>(static_cast<const uint16_t*>(row)[k]) << 16;
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  } else {
    return static_cast<const float*>(row)[k];
  }
}

// Runs `body.template Tile<kM, kN>(m0, n0)` over every x row and W rows [n_begin, n_end), in
// tiles of at most kRowTile by kDenseTile (ForEachRowTile).
template <typename Body>
__attribute__((always_inline)) inline void ForEachTile(int64_t m, int64_t n_begin, int64_t n_end,
                                                       Body& body) {
  int64_t n = n_begin;
  for (; n + kDenseTile <= n_end; n += kDenseTile) ForEachRowTile<kDenseTile>(m, n, body);
  for (; n < n_end; ++n) ForEachRowTile<1>(m, n, body);
}

// The portable body (vector extensions: AVX2 + FMA, or the x86-64 baseline).
void DenseGemmGeneric(const float* x, int64_t m, const DenseMatrix& w, int64_t n_begin,
                      int64_t n_end, float* y);
// Needs AVX-512F and FMA at run time.
void DenseGemmAvx512(const float* x, int64_t m, const DenseMatrix& w, int64_t n_begin,
                     int64_t n_end, float* y);

}  // namespace specd::kernels::cpu::internal
