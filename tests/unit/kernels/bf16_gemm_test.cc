#include "kernels/cpu/bf16_gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "tests/unit/kernels/random_vnni_matrix.h"

namespace specd::kernels::cpu {
namespace {

// x rounded to bf16, to nearest even, as a float.
float RoundToBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  bits = (bits + 0x7fff + ((bits >> 16) & 1)) & 0xffff0000u;
  float rounded;
  std::memcpy(&rounded, &bits, sizeof(rounded));
  return rounded;
}

struct Products {
  std::vector<double> rounded;    // x rounded to bf16, times W
  std::vector<double> exact;      // x times W
  std::vector<double> magnitude;  // Σ_k |x_k · W_nk|
};

Products Expected(const std::vector<float>& x, int64_t rows, const VnniMatrix& w) {
  const std::vector<float> dense = Dequantize(w);
  Products out{std::vector<double>(rows * w.rows), std::vector<double>(rows * w.rows),
               std::vector<double>(rows * w.rows)};
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t n = 0; n < w.rows; ++n) {
      const int64_t at = m * w.rows + n;
      for (int64_t k = 0; k < w.cols; ++k) {
        const double weight = dense[n * w.cols + k];
        const float xk = x[m * w.cols + k];
        out.rounded[at] += RoundToBf16(xk) * weight;
        out.exact[at] += xk * weight;
        out.magnitude[at] += std::fabs(xk * weight);
      }
    }
  }
  return out;
}

struct Shape {
  int64_t x_rows, rows, cols, group_size;
};

// Ragged row blocks, groups of 8 to 256 columns (any multiple of 8), and x rows that take every
// tile: one row, and 31 = 16 + 8 + 4 + 2 + 1 over six blocks (four at a time, the last ragged).
const std::vector<Shape> kShapes = {{1, 37, 64, 64},   {1, 64, 256, 128}, {2, 23, 48, 8},
                                    {5, 40, 96, 24},   {3, 20, 512, 256}, {16, 16, 512, 128},
                                    {31, 87, 256, 128}};

TEST(Bf16GemmTest, FourBitCodesOnBf16Activations) {
  if (!CpuHasBf16Gemm()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const Shape& shape : kShapes) {
    for (const bool symmetric : {true, false}) {
      SCOPED_TRACE(::testing::Message() << shape.x_rows << " × " << shape.cols << " → "
                                        << shape.rows << (symmetric ? "" : ", zero points"));
      const VnniMatrix w =
          testing::RandomInt4VnniMatrix(shape.rows, shape.cols, shape.group_size, symmetric, rng);
      // Activations over a wide range, as hidden states have.
      std::vector<float> x(shape.x_rows * shape.cols);
      for (float& v : x) v = normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 9) - 4);
      const Products expected = Expected(x, shape.x_rows, w);

      std::vector<float> y(shape.x_rows * shape.rows, -1.0f);
      Bf16Gemm(x.data(), shape.x_rows, w, y.data());
      for (size_t i = 0; i < y.size(); ++i) {
        // The rounded activations' product up to float32 sums (the bias 128 costs 7 bits of
        // them); and so within 2⁻⁹ of every term of the exact product, bf16's rounding.
        EXPECT_NEAR(y[i], expected.rounded[i], 0x1p-16 * expected.magnitude[i]) << i;
        EXPECT_NEAR(y[i], expected.exact[i], 0x1p-9 * expected.magnitude[i]) << i;
      }
    }
  }
}

// A row's result does not depend on the other rows of the call (decode against a verify block or a
// batch): every tile shape adds a row's products in the same order.
TEST(Bf16GemmTest, ARowsResultIsTheSameInAnyBatch) {
  if (!CpuHasBf16Gemm()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  std::mt19937 rng(13);
  const VnniMatrix w = testing::RandomInt4VnniMatrix(100, 512, 128, true, rng);
  constexpr int64_t kRows = 31;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(kRows * w.cols);
  for (float& v : x) v = normal(rng);
  std::vector<float> batch(kRows * w.rows);
  Bf16Gemm(x.data(), kRows, w, batch.data());
  for (int64_t m = 0; m < kRows; ++m) {
    std::vector<float> alone(w.rows);
    Bf16Gemm(x.data() + m * w.cols, 1, w, alone.data());
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), batch.begin() + m * w.rows)) << m;
  }
}

}  // namespace
}  // namespace specd::kernels::cpu
