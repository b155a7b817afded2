#pragma once
// PNG line and bar charts for the training report (loss curves, acceptance per draft position):
// axes with 1-2-5 ticks, title, axis labels, legend, drawn on an RGB canvas with the built-in
// bitmap font and written with libpng.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace specd::report {

struct Series {
  std::string name;  // empty: left out of the legend
  std::vector<double> x, y;
};

struct LinePlot {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  // Logarithmic y axis; points with y <= 0 are skipped like NaN/inf ones.
  bool log_y = false;
  // One bar per (integer x, series), grouped side by side, rising from 0 (or from the bottom
  // of a log axis); for "acceptance per draft position".
  bool bars = false;
  int width = 800, height = 480;
};

struct Rgb {
  uint8_t r, g, b;
  bool operator==(const Rgb&) const = default;
};

// The colour of series `index`: a fixed palette of ten, repeating.
Rgb SeriesColor(size_t index);

// Renders the plot and writes it atomically (a temporary file in the same directory, synced,
// then renamed over `path`). Non-finite points (and those beyond ±1e300) are skipped, and a line
// breaks at them.
// InvalidArgument: no series, x/y sizes that differ, no drawable point at all, a non-integer x
// in bars mode, or a size too small for the labels.
absl::Status WritePng(const LinePlot& plot, const std::filesystem::path& path);

}  // namespace specd::report
