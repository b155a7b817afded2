#pragma once
// The x-row loop the GEMM kernels share: every x row, in tiles of kRowTile rows and a ragged last
// one of 3, 2 or 1, each a template instance so that its accumulators stay in registers.
#include <algorithm>
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

// Blocks [b, end) in tiles of kM x rows from m0 by kN blocks, a last ragged one by single blocks.
template <int kM, int kN, typename Body>
void TileBlocks(const Body& body, int64_t m0, int64_t b, int64_t end) {
  for (; b + kN <= end; b += kN) body.template Tile<kM, kN>(m0, b);
  for (; b < end; ++b) body.template Tile<kM, 1>(m0, b);
}

// The tiles of an AVX-512 kernel on the VNNI layout (vnni_gemm.h), x rows [0, rows) by blocks
// [begin, end) of 16 W rows, for a Body whose Tile<kM, kN>(m0, b0) computes kM x rows against kN
// blocks (the calls stay out of line, so this needs no target of its own). One x row (decode) is
// bound by memory and takes four blocks at a time. Several take up to 16 rows against one block,
// a chunk of codes unpacked once for all of them, a few blocks at a time so that their codes come
// from L1 after the first tile of rows.
template <typename Body>
void ForEachBlockTile(const Body& body, int64_t rows, int64_t begin, int64_t end) {
  if (rows == 1) return TileBlocks<1, 4>(body, 0, begin, end);
  constexpr int64_t kBlocksAtATime = 4;
  for (int64_t b = begin; b < end; b += kBlocksAtATime) {
    const int64_t stop = std::min(end, b + kBlocksAtATime);
    int64_t m = 0;
    for (; m + 16 <= rows; m += 16) TileBlocks<16, 1>(body, m, b, stop);
    if (m + 8 <= rows) TileBlocks<8, 1>(body, m, b, stop), m += 8;
    if (m + 4 <= rows) TileBlocks<4, 2>(body, m, b, stop), m += 4;
    if (m + 2 <= rows) TileBlocks<2, 2>(body, m, b, stop), m += 2;
    if (m < rows) TileBlocks<1, 4>(body, m, b, stop);
  }
}

}  // namespace specd::kernels::cpu::internal
