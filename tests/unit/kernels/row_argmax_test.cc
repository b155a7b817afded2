#include "kernels/cpu/row_argmax.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace specd::kernels::cpu {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInfinity = std::numeric_limits<float>::infinity();

std::vector<int64_t> Argmax(const std::vector<float>& x, int64_t rows, int64_t cols,
                            ThreadPool& pool, int64_t stride = -1) {
  std::vector<int64_t> out(rows, -2);
  RowArgmax(x.data(), rows, cols, stride < 0 ? cols : stride, out.data(), pool);
  return out;
}

// Random rows, each with its largest entry planted at a column that walks through lanes, slices
// and the ragged tail.
TEST(RowArgmaxTest, FindsEveryRowsLargestEntryForAnyShapeAndThreadCount) {
  std::mt19937 random(7);
  std::normal_distribution<float> normal;
  for (const int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (const int64_t rows : {1, 2, 3, 16, 17}) {
      for (const int64_t cols : {1, 15, 16, 17, 33, 1000, 100003}) {
        std::vector<float> x(rows * cols);
        for (float& value : x) value = normal(random);
        std::vector<int64_t> planted(rows);
        for (int64_t row = 0; row < rows; ++row) {
          planted[row] = (row * 7919 + cols / 2 + threads) % cols;
          x[row * cols + planted[row]] = 100.0f + static_cast<float>(row);
        }
        EXPECT_EQ(Argmax(x, rows, cols, pool), planted)
            << rows << " × " << cols << ", " << threads << " threads";
      }
    }
  }
}

TEST(RowArgmaxTest, TheFirstOfEqualEntriesWins) {
  ThreadPool pool(2);
  const int64_t cols = 1000;
  // Ties within a lane, across lanes, across the two threads' slices and in the tail.
  for (const std::vector<int64_t>& equal : std::vector<std::vector<int64_t>>{
           {5, 21}, {21, 5 + 16}, {17, 3}, {499, 512}, {600, 999}, {992, 999}, {0, 999}}) {
    std::vector<float> x(cols, 0.0f);
    for (const int64_t column : equal) x[column] = 3.0f;
    EXPECT_EQ(Argmax(x, 1, cols, pool), std::vector<int64_t>{std::min(equal[0], equal[1])});
  }
  const std::vector<float> flat(cols, -kInfinity);
  EXPECT_EQ(Argmax(flat, 1, cols, pool), std::vector<int64_t>{0});
}

TEST(RowArgmaxTest, TheFirstNaNBeatsEveryNumber) {
  ThreadPool pool(2);
  const int64_t cols = 1000;
  for (const int64_t first : {0, 7, 16, 600, 998}) {
    std::vector<float> x(cols, 0.0f);
    x[first] = kNaN;
    x[999] = kNaN;
    x[(first + 500) % cols] = kInfinity;
    EXPECT_EQ(Argmax(x, 1, cols, pool), std::vector<int64_t>{first});
  }
}

TEST(RowArgmaxTest, ReadsRowsAtTheirStrideAndNothingBeyondTheirColumns) {
  ThreadPool pool(2);
  const int64_t rows = 3, cols = 40, stride = 64;
  std::vector<float> x(rows * stride, 1000.0f);  // the padding outweighs every entry
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t column = 0; column < cols; ++column) {
      x[row * stride + column] = static_cast<float>((column * 13 + row * 5) % cols);
    }
  }
  std::vector<int64_t> expected(rows);
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t column = 0; column < cols; ++column) {
      if ((column * 13 + row * 5) % cols == cols - 1) expected[row] = column;
    }
  }
  EXPECT_EQ(Argmax(x, rows, cols, pool, stride), expected);
}

}  // namespace
}  // namespace specd::kernels::cpu
