#include "training/report/line_plot.h"

#include <png.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <span>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/io/atomic_file.h"
#include "training/report/bitmap_font.h"

namespace specd::report {
namespace {

// matplotlib's "tab10".
constexpr std::array<Rgb, 10> kPalette = {{{31, 119, 180},
                                           {255, 127, 14},
                                           {44, 160, 44},
                                           {214, 39, 40},
                                           {148, 103, 189},
                                           {140, 86, 75},
                                           {227, 119, 194},
                                           {127, 127, 127},
                                           {188, 189, 34},
                                           {23, 190, 207}}};
constexpr Rgb kInk{40, 40, 40};
constexpr Rgb kGrid{225, 225, 225};

// Ticks per axis: at most this many for continuous axes, more for bars' integer positions.
constexpr int kMaxTicks = 6;
constexpr int kMaxIntegerTicks = 16;
constexpr int kMaxSide = 8192;

// Half-open pixel rectangle [left, right) × [top, bottom).
struct Rect {
  int left, top, right, bottom;
};

class Canvas {
 public:
  Canvas(int width, int height)
      : width_(width), height_(height), rgb_(static_cast<size_t>(width) * height * 3, 255) {}

  int width() const { return width_; }
  int height() const { return height_; }
  const std::vector<uint8_t>& rgb() const { return rgb_; }
  Rect bounds() const { return {0, 0, width_, height_}; }

  void FillRect(Rect r, Rgb color, Rect clip) {
    const int x0 = std::max({r.left, clip.left, 0}), x1 = std::min({r.right, clip.right, width_});
    const int y0 = std::max({r.top, clip.top, 0}), y1 = std::min({r.bottom, clip.bottom, height_});
    for (int y = y0; y < y1; ++y) {
      for (int x = x0; x < x1; ++x) {
        uint8_t* pixel = &rgb_[(static_cast<size_t>(y) * width_ + x) * 3];
        pixel[0] = color.r;
        pixel[1] = color.g;
        pixel[2] = color.b;
      }
    }
  }
  void FillRect(Rect r, Rgb color) { FillRect(r, color, bounds()); }

  // Bresenham, each step a 2×2 block, so the line is 2 px wide.
  void Line(int x0, int y0, int x1, int y1, Rgb color, Rect clip) {
    const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
    const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    for (int error = dx + dy;;) {
      FillRect({x0, y0, x0 + 2, y0 + 2}, color, clip);
      if (x0 == x1 && y0 == y1) return;
      const int doubled = 2 * error;
      if (doubled >= dy) {
        error += dy;
        x0 += sx;
      }
      if (doubled <= dx) {
        error += dx;
        y0 += sy;
      }
    }
  }

  // Text whose top-left corner is (x, y); every font pixel becomes a scale×scale block. With
  // `vertical` it is turned 90° counter-clockwise (reading upwards) and (x, y) is the top-left
  // corner of the turned box.
  void Text(int x, int y, std::string_view text, int scale, Rgb color, bool vertical = false) {
    const int advance = (kGlyphWidth + 1) * scale;
    const int length = static_cast<int>(text.size()) * advance;
    for (size_t i = 0; i < text.size(); ++i) {
      const Glyph& glyph = GlyphFor(text[i]);
      for (int row = 0; row < kGlyphHeight; ++row) {
        for (int col = 0; col < kGlyphWidth; ++col) {
          if (!(glyph[row] & (1 << (kGlyphWidth - 1 - col)))) continue;
          const int along = static_cast<int>(i) * advance + col * scale;  // along the reading
          const int across = row * scale;                                 // top to bottom
          const int px = vertical ? x + across : x + along;
          const int py = vertical ? y + length - along - scale : y + across;
          FillRect({px, py, px + scale, py + scale}, color);
        }
      }
    }
  }

 private:
  int width_, height_;
  std::vector<uint8_t> rgb_;
};

int TextWidth(std::string_view text, int scale) {
  return text.empty() ? 0 : (static_cast<int>(text.size()) * (kGlyphWidth + 1) - 1) * scale;
}

// Maps data values onto [0, 1] along an axis; `lo` and `hi` are in log10 units on a log axis.
struct Axis {
  double lo, hi;
  bool log;
  std::vector<double> ticks;  // data values, inside [lo, hi]

  double Unit(double v) const { return ((log ? std::log10(v) : v) - lo) / (hi - lo); }
};

// The multiples of the smallest 1-2-5 step that puts at most max_ticks of them in [lo, hi].
std::vector<double> NiceTicks(double lo, double hi, int max_ticks, double min_step = 0) {
  const double magnitude = std::pow(10.0, std::floor(std::log10((hi - lo) / 100)));
  for (int k = 0;; ++k) {
    const double step = std::array{1.0, 2.0, 5.0}[k % 3] * magnitude * std::pow(10.0, k / 3);
    if (!(step > 0) || !std::isfinite(step)) return {};  // a span of denormals
    if (step < min_step) continue;
    const double first = std::ceil(lo / step), last = std::floor(hi / step);
    if (last - first + 1 > max_ticks) continue;
    std::vector<double> ticks;
    for (double i = first; i <= last; ++i) {
      const double tick = i * step;
      ticks.push_back(std::abs(tick) < step * 1e-9 ? 0 : tick);  // no "-0" or 1e-17
    }
    return ticks;
  }
}

// [lo, hi] widened by pad_fraction on each side, or around a single value when lo == hi.
void Widen(double& lo, double& hi, double pad_fraction) {
  if (lo == hi) {
    const double half = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= half;
    hi += half;
    return;
  }
  const double pad = (hi - lo) * pad_fraction;
  lo -= pad;
  hi += pad;
}

Axis LinearAxis(double lo, double hi, double pad_fraction, bool keep_zero_edge) {
  const bool zero_lo = keep_zero_edge && lo == 0, zero_hi = keep_zero_edge && hi == 0;
  Widen(lo, hi, pad_fraction);
  if (zero_lo) lo = 0;  // bars stand on the frame rather than floating above it
  if (zero_hi) hi = 0;
  return {lo, hi, false, NiceTicks(lo, hi, kMaxTicks)};
}

// Ticks at 1-2-5 × 10^k, else at whole decades (every n-th when many), else linear ones when
// the range holds fewer than two of those.
Axis LogAxis(double lo, double hi) {
  double log_lo = std::log10(lo), log_hi = std::log10(hi);
  Widen(log_lo, log_hi, 0.05);
  Axis axis{log_lo, log_hi, true, {}};
  const auto ticks_at = [&](std::span<const double> mantissas, int decade_step) {
    std::vector<double> ticks;
    for (int e = static_cast<int>(std::floor(log_lo)); e <= static_cast<int>(std::ceil(log_hi));
         ++e) {
      if (e % decade_step != 0) continue;
      for (const double m : mantissas) {
        const double tick = m * std::pow(10.0, e);
        const double log_tick = std::log10(tick);
        if (log_tick >= log_lo && log_tick <= log_hi) ticks.push_back(tick);
      }
    }
    return ticks;
  };
  for (const auto& mantissas : {std::vector<double>{1, 2, 5}, std::vector<double>{1}}) {
    axis.ticks = ticks_at(mantissas, 1);
    if (static_cast<int>(axis.ticks.size()) <= kMaxTicks) break;
  }
  for (int decade_step = 2; static_cast<int>(axis.ticks.size()) > kMaxTicks; ++decade_step) {
    axis.ticks = ticks_at(std::array{1.0}, decade_step);
  }
  if (axis.ticks.size() < 2) {
    axis.ticks = NiceTicks(std::pow(10.0, log_lo), std::pow(10.0, log_hi), kMaxTicks);
  }
  return axis;
}

// Bars sit on integer positions, each in a slot one unit wide.
Axis IntegerAxis(double lo, double hi) {
  lo -= 0.5;
  hi += 0.5;
  return {lo, hi, false, NiceTicks(lo, hi, kMaxIntegerTicks, /*min_step=*/1)};
}

// "%g" with a shorter exponent: 2e-05 → 2e-5, 1e+06 → 1e6.
std::string TickLabel(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", value);
  std::string label = buffer;
  if (const size_t e = label.find('e'); e != std::string::npos) {
    size_t digits = e + 1;
    if (label[digits] == '+') label.erase(digits, 1);
    if (label[digits] == '-') ++digits;
    while (digits + 1 < label.size() && label[digits] == '0') label.erase(digits, 1);
  }
  return label;
}

// Beyond this magnitude an axis span would overflow to inf.
constexpr double kMaxMagnitude = 1e300;

bool Drawable(double x, double y, bool log_y) {
  return std::abs(x) <= kMaxMagnitude && std::abs(y) <= kMaxMagnitude && (!log_y || y > 0);
}

absl::Status Validate(const LinePlot& plot) {
  if (plot.series.empty()) return absl::InvalidArgumentError("plot: no series");
  if (plot.width <= 0 || plot.height <= 0 || plot.width > kMaxSide || plot.height > kMaxSide) {
    return absl::InvalidArgumentError(
        absl::StrCat("plot '", plot.title, "': size ", plot.width, "x", plot.height));
  }
  bool any_point = false;
  for (const Series& s : plot.series) {
    if (s.x.size() != s.y.size()) {
      return absl::InvalidArgumentError(absl::StrCat("plot series '", s.name, "': ", s.x.size(),
                                                     " x values but ", s.y.size(), " y values"));
    }
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!Drawable(s.x[i], s.y[i], plot.log_y)) continue;
      any_point = true;
      if (plot.bars && s.x[i] != std::round(s.x[i])) {
        return absl::InvalidArgumentError(
            absl::StrCat("plot series '", s.name, "': bar at non-integer x ", s.x[i]));
      }
    }
  }
  if (!any_point) {
    return absl::InvalidArgumentError(absl::StrCat("plot '", plot.title, "': no finite point",
                                                   plot.log_y ? " with y > 0" : "", " to draw"));
  }
  return absl::OkStatus();
}

// Lays out and draws everything; fails only when the canvas is too small for the labels.
absl::Status Render(const LinePlot& plot, Canvas& canvas) {
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const Series& s : plot.series) {
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!Drawable(s.x[i], s.y[i], plot.log_y)) continue;
      x_lo = std::min(x_lo, s.x[i]);
      x_hi = std::max(x_hi, s.x[i]);
      y_lo = std::min(y_lo, s.y[i]);
      y_hi = std::max(y_hi, s.y[i]);
    }
  }
  if (plot.bars && !plot.log_y) {
    y_lo = std::min(y_lo, 0.0);
    y_hi = std::max(y_hi, 0.0);
  }
  const Axis x_axis = plot.bars ? IntegerAxis(x_lo, x_hi) : LinearAxis(x_lo, x_hi, 0.02, false);
  const Axis y_axis = plot.log_y ? LogAxis(y_lo, y_hi) : LinearAxis(y_lo, y_hi, 0.05, plot.bars);

  // Sizes in canvas pixels, all multiples of the text scale.
  const int scale =
      std::max(1, static_cast<int>(std::lround(std::min(plot.width / 400.0, plot.height / 240.0))));
  const int text_height = kGlyphHeight * scale, pad = 4 * scale, tick = 3 * scale;
  const int char_advance = (kGlyphWidth + 1) * scale;

  std::vector<std::string> x_labels, y_labels;
  int y_label_width = 0;
  for (const double t : x_axis.ticks) x_labels.push_back(TickLabel(t));
  for (const double t : y_axis.ticks) {
    y_labels.push_back(TickLabel(t));
    y_label_width = std::max(y_label_width, TextWidth(y_labels.back(), scale));
  }

  // Legend entries (named series only), wrapped into centred rows below the x label.
  const int swatch = 3 * char_advance;
  struct Entry {
    size_t series;
    int width;
  };
  std::vector<std::vector<Entry>> legend_rows;
  int row_width = 0;
  for (size_t i = 0; i < plot.series.size(); ++i) {
    if (plot.series[i].name.empty()) continue;
    const int width = swatch + char_advance + TextWidth(plot.series[i].name, scale);
    const int gap = 2 * char_advance;
    if (legend_rows.empty() || row_width + gap + width > plot.width - 2 * pad) {
      legend_rows.emplace_back();
      row_width = width;
    } else {
      row_width += gap + width;
    }
    legend_rows.back().push_back({i, width});
  }
  const int legend_height = static_cast<int>(legend_rows.size()) * (text_height + pad);

  Rect area;
  area.top = pad + (plot.title.empty() ? text_height / 2 : text_height + 2 * pad);
  area.left = pad + (plot.y_label.empty() ? 0 : text_height + 2 * pad) + y_label_width + pad + tick;
  area.right = plot.width - pad -
               std::max(pad, x_labels.empty() ? 0 : TextWidth(x_labels.back(), scale) / 2);
  area.bottom = plot.height - pad - legend_height -
                (plot.x_label.empty() ? 0 : text_height + 2 * pad) - (text_height + pad + tick);
  if (area.right - area.left < 20 || area.bottom - area.top < 20) {
    return absl::InvalidArgumentError(absl::StrCat("plot '", plot.title, "': ", plot.width, "x",
                                                   plot.height, " is too small for its labels"));
  }
  const auto px = [&](double x) {
    return static_cast<int>(std::lround(area.left + x_axis.Unit(x) * (area.right - 1 - area.left)));
  };
  const auto py = [&](double y) {
    return static_cast<int>(
        std::lround(area.bottom - 1 - y_axis.Unit(y) * (area.bottom - 1 - area.top)));
  };

  // Grid, then data, then the frame with its ticks and labels.
  for (const double t : x_axis.ticks)
    canvas.FillRect({px(t), area.top, px(t) + 1, area.bottom}, kGrid);
  for (const double t : y_axis.ticks)
    canvas.FillRect({area.left, py(t), area.right, py(t) + 1}, kGrid);

  if (plot.bars) {
    const double slot = (area.right - 1 - area.left) / (x_axis.hi - x_axis.lo);
    const double bar_width = 0.8 * slot / static_cast<double>(plot.series.size());
    const int baseline = plot.log_y ? area.bottom - 1 : py(0);
    for (size_t k = 0; k < plot.series.size(); ++k) {
      const Series& s = plot.series[k];
      for (size_t i = 0; i < s.x.size(); ++i) {
        if (!Drawable(s.x[i], s.y[i], plot.log_y)) continue;
        const double left = px(s.x[i]) - 0.4 * slot + static_cast<double>(k) * bar_width;
        const int x0 = static_cast<int>(std::lround(left));
        const int x1 = std::max(x0 + 1, static_cast<int>(std::lround(left + bar_width)));
        const int top = py(s.y[i]);
        canvas.FillRect({x0, std::min(top, baseline), x1, std::max(top, baseline) + 1},
                        SeriesColor(k), area);
      }
    }
  } else {
    for (size_t k = 0; k < plot.series.size(); ++k) {
      const Series& s = plot.series[k];
      const auto drawable = [&](size_t i) {
        return i < s.x.size() && Drawable(s.x[i], s.y[i], plot.log_y);
      };
      for (size_t i = 0; i < s.x.size(); ++i) {
        if (!drawable(i)) continue;
        const int x = px(s.x[i]), y = py(s.y[i]);
        if (drawable(i + 1)) {
          canvas.Line(x, y, px(s.x[i + 1]), py(s.y[i + 1]), SeriesColor(k), area);
        } else if (i == 0 || !drawable(i - 1)) {  // an isolated point: a dot
          canvas.FillRect({x - 1, y - 1, x + 3, y + 3}, SeriesColor(k), area);
        }
      }
    }
  }

  canvas.FillRect({area.left - 1, area.top - 1, area.right + 1, area.top}, kInk);
  canvas.FillRect({area.left - 1, area.bottom, area.right + 1, area.bottom + 1}, kInk);
  canvas.FillRect({area.left - 1, area.top - 1, area.left, area.bottom + 1}, kInk);
  canvas.FillRect({area.right, area.top - 1, area.right + 1, area.bottom + 1}, kInk);
  for (size_t i = 0; i < x_axis.ticks.size(); ++i) {
    const int x = px(x_axis.ticks[i]);
    canvas.FillRect({x, area.bottom, x + 1, area.bottom + tick}, kInk);
    canvas.Text(x - TextWidth(x_labels[i], scale) / 2, area.bottom + tick + pad, x_labels[i], scale,
                kInk);
  }
  for (size_t i = 0; i < y_axis.ticks.size(); ++i) {
    const int y = py(y_axis.ticks[i]);
    canvas.FillRect({area.left - 1 - tick, y, area.left - 1, y + 1}, kInk);
    canvas.Text(area.left - 1 - tick - pad - TextWidth(y_labels[i], scale), y - text_height / 2,
                y_labels[i], scale, kInk);
  }

  const int center_x = (area.left + area.right) / 2;
  canvas.Text(center_x - TextWidth(plot.title, scale) / 2, pad, plot.title, scale, kInk);
  canvas.Text(pad, (area.top + area.bottom) / 2 - TextWidth(plot.y_label, scale) / 2, plot.y_label,
              scale, kInk, /*vertical=*/true);
  int y = area.bottom + tick + pad + text_height + pad;
  if (!plot.x_label.empty()) {
    canvas.Text(center_x - TextWidth(plot.x_label, scale) / 2, y, plot.x_label, scale, kInk);
    y += text_height + 2 * pad;
  }
  for (const std::vector<Entry>& row : legend_rows) {
    int width = 0;
    for (const Entry& e : row) width += e.width + (width ? 2 * char_advance : 0);
    int x = (plot.width - width) / 2;
    for (const Entry& e : row) {
      const Rgb color = SeriesColor(e.series);
      if (plot.bars) {
        canvas.FillRect({x + swatch - text_height, y, x + swatch, y + text_height}, color);
      } else {
        canvas.Line(x, y + text_height / 2 - 1, x + swatch - 2, y + text_height / 2 - 1, color,
                    canvas.bounds());
      }
      canvas.Text(x + swatch + char_advance, y, plot.series[e.series].name, scale, kInk);
      x += e.width + 2 * char_advance;
    }
    y += text_height + pad;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint8_t>> EncodePng(const Canvas& canvas) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(canvas.width());
  image.height = static_cast<png_uint_32>(canvas.height());
  image.format = PNG_FORMAT_RGB;
  png_alloc_size_t bytes = 0;  // a first call with no buffer measures
  if (png_image_write_to_memory(&image, nullptr, &bytes, 0, canvas.rgb().data(), 0, nullptr)) {
    std::vector<uint8_t> png(bytes);
    if (png_image_write_to_memory(&image, png.data(), &bytes, 0, canvas.rgb().data(), 0, nullptr)) {
      png.resize(bytes);
      return png;
    }
  }
  return absl::InternalError(absl::StrCat("libpng: ", std::string(image.message)));
}

}  // namespace

Rgb SeriesColor(size_t index) { return kPalette[index % kPalette.size()]; }

absl::Status WritePng(const LinePlot& plot, const std::filesystem::path& path) {
  if (absl::Status status = Validate(plot); !status.ok()) return status;
  Canvas canvas(plot.width, plot.height);
  if (absl::Status status = Render(plot, canvas); !status.ok()) return status;
  absl::StatusOr<std::vector<uint8_t>> png = EncodePng(canvas);
  if (!png.ok()) return png.status();
  return io::WriteFileAtomically(path, std::as_bytes(std::span(*png)));
}

}  // namespace specd::report
