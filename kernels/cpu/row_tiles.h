#pragma once
// The x-row loop the GEMM kernels share: every x row, in tiles of kRowTile rows and a ragged last
// one of 3, 2 or 1, each a template instance so that its accumulators stay in registers.
#include <cstdint>

namespace specd::kernels::cpu::internal {

inline constexpr int kRowTile = 4;

// Runs `body.template Tile<kM, kN>(m0, n)` for every tile of x rows [0, m). Inlined into each
// ISA's body (so compiled for its target); `Body` is a struct, not a lambda, whose Tile carries
// that target.
template <int kN, typename Body>
__attribute__((always_inline)) inline void ForEachRowTile(int64_t m, int64_t n, Body& body) {
  int64_t i = 0;
  for (; i + kRowTile <= m; i += kRowTile) body.template Tile<kRowTile, kN>(i, n);
  switch (m - i) {
    case 3:
      body.template Tile<3, kN>(i, n);
      break;
    case 2:
      body.template Tile<2, kN>(i, n);
      break;
    case 1:
      body.template Tile<1, kN>(i, n);
      break;
  }
}

}  // namespace specd::kernels::cpu::internal
