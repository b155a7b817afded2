#pragma once
// A 5×7 bitmap font covering printable ASCII, for the labels of the report's PNG plots: no
// font files or FreeType on the training machines. Cells are 5×8: the bottom row holds the
// descenders of g, j, p, q, y and the comma.
#include <array>
#include <cstdint>

namespace specd::report {

inline constexpr int kGlyphWidth = 5;
inline constexpr int kGlyphHeight = 8;

// One row per entry, top to bottom; bit 4 is the leftmost column. Characters outside
// printable ASCII (0x20..0x7E) get the glyph of '?'.
using Glyph = std::array<uint8_t, kGlyphHeight>;
const Glyph& GlyphFor(char c);

}  // namespace specd::report
