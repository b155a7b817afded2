#include "training/report/line_plot.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <png.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "training/report/bitmap_font.h"

namespace specd::report {
namespace {

namespace fs = std::filesystem;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;

  Rgb At(int x, int y) const {
    const uint8_t* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
    return {p[0], p[1], p[2]};
  }
  // Rows holding at least min_count pixels of `color`, top to bottom.
  std::vector<int> RowsWith(Rgb color, int min_count) const {
    std::vector<int> rows;
    for (int y = 0; y < height; ++y) {
      int count = 0;
      for (int x = 0; x < width; ++x) count += At(x, y) == color;
      if (count >= min_count) rows.push_back(y);
    }
    return rows;
  }
};

Image ReadPng(const fs::path& path) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, path.c_str())) {
    ADD_FAILURE() << "libpng: " << image.message;
    return {};
  }
  image.format = PNG_FORMAT_RGB;
  Image result{static_cast<int>(image.width), static_cast<int>(image.height),
               std::vector<uint8_t>(PNG_IMAGE_SIZE(image))};
  if (!png_image_finish_read(&image, nullptr, result.rgb.data(), 0, nullptr)) {
    ADD_FAILURE() << "libpng: " << image.message;
    return {};
  }
  return result;
}

double Mean(const std::vector<int>& values) {
  double sum = 0;
  for (const int v : values) sum += v;
  return values.empty() ? kNan : sum / static_cast<double>(values.size());
}

Series Constant(std::string name, double y) {
  Series s{std::move(name), {}, {}};
  for (int x = 0; x <= 10; ++x) {
    s.x.push_back(x);
    s.y.push_back(y);
  }
  return s;
}

LinePlot Plot(std::string title, std::vector<Series> series) {
  LinePlot plot;
  plot.title = std::move(title);
  plot.series = std::move(series);
  return plot;
}

class LinePlotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("line_plot_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
};

TEST_F(LinePlotTest, WritesAPngOfTheRequestedSizeAndNothingElse) {
  LinePlot plot = Plot("QAD loss", {{"train", {0, 100, 200, 300}, {2.5, 1.4, 1.1, 0.9}},
                                    {"eval", {0, 150, 300}, {2.6, 1.3, 1.0}}});
  plot.x_label = "step";
  plot.y_label = "loss";
  plot.width = 640;
  plot.height = 360;
  const fs::path path = dir_ / "loss.png";
  ASSERT_TRUE(WritePng(plot, path).ok());

  const Image image = ReadPng(path);
  EXPECT_EQ(image.width, 640);
  EXPECT_EQ(image.height, 360);
  EXPECT_EQ(image.At(0, 0), (Rgb{255, 255, 255}));
  EXPECT_FALSE(image.RowsWith(SeriesColor(0), 1).empty());
  EXPECT_FALSE(image.RowsWith(SeriesColor(1), 1).empty());
  // Dark text in the top band: the title.
  bool title = false;
  for (int y = 0; y < 20; ++y) {
    for (int x = 0; x < image.width; ++x) title |= image.At(x, y).r < 100;
  }
  EXPECT_TRUE(title);
  // The temporary file was renamed, not left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(LinePlotTest, HorizontalLinesLandOnTheRowsOfTheirValues) {
  const LinePlot plot =
      Plot("levels", {Constant("zero", 0), Constant("five", 5), Constant("ten", 10)});
  const fs::path path = dir_ / "levels.png";
  ASSERT_TRUE(WritePng(plot, path).ok());

  const Image image = ReadPng(path);
  // A line crosses most of the width; legend swatches are short.
  std::vector<std::vector<int>> rows;
  for (size_t k = 0; k < 3; ++k) {
    rows.push_back(image.RowsWith(SeriesColor(k), image.width / 2));
    ASSERT_EQ(rows.back().size(), 2u) << "series " << k << ": 2 px wide and straight";
    EXPECT_EQ(rows.back()[1], rows.back()[0] + 1);
  }
  const double zero = Mean(rows[0]), five = Mean(rows[1]), ten = Mean(rows[2]);
  EXPECT_GT(zero, ten + 100);  // larger values higher up
  EXPECT_NEAR(five, (zero + ten) / 2, 1.0);
}

TEST_F(LinePlotTest, LogAxisSpacesDecadesEvenlyAndSkipsNonPositiveValues) {
  LinePlot plot = Plot("log", {Constant("1", 1), Constant("10", 10), Constant("100", 100)});
  plot.log_y = true;
  plot.series[1].y[3] = 0;
  plot.series[1].y[4] = -1;
  const fs::path path = dir_ / "log.png";
  ASSERT_TRUE(WritePng(plot, path).ok());

  const Image image = ReadPng(path);
  const double one = Mean(image.RowsWith(SeriesColor(0), image.width / 2));
  const double hundred = Mean(image.RowsWith(SeriesColor(2), image.width / 2));
  // The broken line of 10 still covers a good part of the width on its own row.
  const double ten = Mean(image.RowsWith(SeriesColor(1), image.width / 4));
  EXPECT_GT(one, hundred + 100);
  EXPECT_NEAR(ten, (one + hundred) / 2, 1.0);
}

TEST_F(LinePlotTest, BarsAreFilledRectanglesRisingFromZero) {
  // Unnamed: no legend swatch.
  LinePlot plot = Plot("acceptance per draft position", {{"", {1, 2, 3}, {0.9, 0.6, 0.3}}});
  plot.bars = true;
  const fs::path path = dir_ / "bars.png";
  ASSERT_TRUE(WritePng(plot, path).ok());

  const Image image = ReadPng(path);
  const Rgb color = SeriesColor(0);
  struct Box {
    int left, right, top, bottom;  // inclusive
  };
  std::vector<Box> bars;
  for (int x = 0; x < image.width; ++x) {
    int top = -1, bottom = -1;
    for (int y = 0; y < image.height; ++y) {
      if (!(image.At(x, y) == color)) continue;
      if (top < 0) top = y;
      bottom = y;
    }
    if (top < 0) continue;
    if (bars.empty() || bars.back().right != x - 1) bars.push_back({x, x, top, bottom});
    Box& bar = bars.back();
    bar.right = x;
    EXPECT_EQ(top, bar.top) << "column " << x;
    EXPECT_EQ(bottom, bar.bottom) << "column " << x;
    for (int y = top; y <= bottom; ++y) EXPECT_EQ(image.At(x, y), color) << x << "," << y;
  }
  ASSERT_EQ(bars.size(), 3u);
  const double unit = (bars[0].bottom - bars[0].top + 1) / 0.9;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(bars[i].bottom, bars[0].bottom);
    EXPECT_NEAR(bars[i].bottom - bars[i].top + 1, (0.9 - 0.3 * i) * unit, 2.0);
    EXPECT_GT(bars[i].right - bars[i].left, 20);
  }
}

TEST_F(LinePlotTest, BarsOfSeveralSeriesStandSideBySide) {
  LinePlot plot = Plot("", {{"base", {1}, {0.5}}, {"tuned", {1}, {0.7}}});
  plot.bars = true;
  const fs::path path = dir_ / "grouped.png";
  ASSERT_TRUE(WritePng(plot, path).ok());

  const Image image = ReadPng(path);
  // At least 20 px of a colour in a row: a bar, not the legend's swatch.
  const std::vector<int> first_rows = image.RowsWith(SeriesColor(0), 20);
  const std::vector<int> second_rows = image.RowsWith(SeriesColor(1), 20);
  ASSERT_FALSE(first_rows.empty());
  ASSERT_FALSE(second_rows.empty());
  EXPECT_LT(second_rows.front(), first_rows.front());  // 0.7 rises above 0.5
  EXPECT_EQ(second_rows.back(), first_rows.back());    // both stand on zero
  int first_right = -1, second_left = image.width;
  for (int x = 0; x < image.width; ++x) {
    const Rgb pixel = image.At(x, first_rows.back());
    if (pixel == SeriesColor(0)) first_right = x;
    if (pixel == SeriesColor(1)) second_left = std::min(second_left, x);
  }
  EXPECT_LT(first_right, second_left);
}

TEST_F(LinePlotTest, SkipsNonFinitePoints) {
  const LinePlot plot =
      Plot("with gaps", {{"loss", {0, 1, 2, 3, kNan, 5, 6}, {3, 2, kNan, kInf, 1, 1e308, -kInf}}});
  const fs::path path = dir_ / "gaps.png";
  ASSERT_TRUE(WritePng(plot, path).ok());
  EXPECT_FALSE(ReadPng(path).RowsWith(SeriesColor(0), 1).empty());
}

TEST_F(LinePlotTest, RejectsInvalidPlotsWithoutWritingAFile) {
  const Series good{"s", {0, 1}, {1, 2}};
  std::vector<LinePlot> plots = {
      Plot("no series", {}),
      Plot("sizes differ", {{"s", {0, 1, 2}, {1, 2}}}),
      Plot("nothing finite", {{"s", {0, 1}, {kNan, kInf}}}),
      Plot("nothing positive", {{"s", {0, 1}, {0, -2}}}),
      Plot("bar between positions", {{"s", {0.5, 1}, {1, 2}}}),
      Plot("no pixels", {good}),
      Plot("no room inside the labels", {good}),
  };
  plots[3].log_y = true;
  plots[4].bars = true;
  plots[5].width = 0;
  plots[6].width = 60;
  plots[6].height = 40;
  for (size_t i = 0; i < plots.size(); ++i) {
    const fs::path path = dir_ / "bad.png";
    const absl::Status status = WritePng(plots[i], path);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
        << plots[i].title << ": " << status;
    EXPECT_FALSE(fs::exists(path)) << plots[i].title;
  }
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(LinePlotTest, ReportsAMissingDirectory) {
  const LinePlot plot = Plot("", {{"s", {0, 1}, {1, 2}}});
  EXPECT_FALSE(WritePng(plot, dir_ / "missing" / "plot.png").ok());
}

TEST(BitmapFontTest, CoversPrintableAsciiAndFallsBackToAQuestionMark) {
  EXPECT_THAT(GlyphFor(' '), ::testing::Each(0));
  for (char c = '!'; c <= '~'; ++c) {
    EXPECT_THAT(GlyphFor(c), ::testing::Contains(::testing::Ne(0))) << c;
    for (const uint8_t row : GlyphFor(c)) EXPECT_LT(row, 1 << kGlyphWidth) << c;
  }
  EXPECT_EQ(GlyphFor('\n'), GlyphFor('?'));
  EXPECT_EQ(GlyphFor('\x7f'), GlyphFor('?'));
  EXPECT_NE(GlyphFor('0'), GlyphFor('O'));
}

}  // namespace
}  // namespace specd::report
