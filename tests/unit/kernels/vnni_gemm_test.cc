#include "kernels/cpu/vnni_gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tests/unit/kernels/random_vnni_matrix.h"

namespace specd::kernels::cpu {
namespace {

std::vector<VnniGemmIsa> IsasThisCpuRuns() {
  std::vector<VnniGemmIsa> isas;
  if (BestVnniGemmIsa() != VnniGemmIsa::kNone) isas.push_back(VnniGemmIsa::kAvx2);
  if (BestVnniGemmIsa() == VnniGemmIsa::kAvx512Vnni) isas.push_back(VnniGemmIsa::kAvx512Vnni);
  return isas;
}

// x rounded as the kernel defines it: per row and block of `columns`, to the nearest multiple of
// the block's absolute maximum / 127.
std::vector<double> RoundedActivations(const std::vector<float>& x, int64_t columns) {
  std::vector<double> rounded(x.size());
  for (size_t block = 0; block < x.size(); block += columns) {
    float amax = 0;
    for (int64_t k = 0; k < columns; ++k) amax = std::max(amax, std::fabs(x[block + k]));
    const float scale = amax / 127.0f;
    for (int64_t k = 0; k < columns; ++k) {
      const float q = scale == 0 ? 0.0f : std::nearbyint(x[block + k] * (1.0f / scale));
      rounded[block + k] = static_cast<double>(q) * scale;
    }
  }
  return rounded;
}

// y = x̃ Wᵀ in double, from the rounded activations and the weights the layout holds: what the
// kernel computes up to float32 summation.
std::vector<double> Expected(const std::vector<float>& x, int64_t rows, const VnniMatrix& w) {
  const std::vector<double> rounded = RoundedActivations(x, w.activation_block());
  const std::vector<float> dense = Dequantize(w);
  std::vector<double> y(rows * w.rows, 0.0);
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t n = 0; n < w.rows; ++n) {
      for (int64_t k = 0; k < w.cols; ++k) {
        y[m * w.rows + n] += rounded[m * w.cols + k] * dense[n * w.cols + k];
      }
    }
  }
  return y;
}

std::vector<float> Normal(int64_t count, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = normal(rng);
  return values;
}

// Every ISA against the definition, to float32 summation's error.
void ExpectEveryIsaComputes(const VnniMatrix& w, int64_t rows, std::mt19937& rng) {
  const std::vector<float> x = Normal(rows * w.cols, rng);
  const std::vector<double> expected = Expected(x, rows, w);
  double largest = 1e-30;
  for (double v : expected) largest = std::max(largest, std::fabs(v));
  for (const VnniGemmIsa isa : IsasThisCpuRuns()) {
    SCOPED_TRACE(isa == VnniGemmIsa::kAvx2 ? "avx2" : "avx512 vnni");
    std::vector<float> y(rows * w.rows, -1.0f);
    VnniGemm(x.data(), rows, w, y.data(), ThreadPool::Shared(), isa);
    double error = 0;
    for (size_t i = 0; i < y.size(); ++i) error = std::max(error, std::fabs(y[i] - expected[i]));
    EXPECT_LE(error, 1e-5 * largest);
  }
}

struct Shape {
  int64_t x_rows, rows, cols, group_size;
};

// Ragged row blocks (and half blocks), several groups, activation blocks of 32, 64 and 128
// columns (two to a group of 256), and x rows that take every tile: one row, and 31 = 16 + 8 + 4 +
// 2 + 1 over six blocks (four at a time, the last ragged).
const std::vector<Shape> kShapes = {{1, 37, 64, 64},   {1, 64, 256, 128}, {2, 23, 128, 32},
                                    {5, 40, 256, 64},  {3, 20, 512, 256}, {16, 16, 512, 128},
                                    {31, 87, 256, 128}};

TEST(VnniGemmTest, ActivationBlocksAreTheLargestThatDivideAGroup) {
  EXPECT_EQ(VnniActivationBlock(32), 32);
  EXPECT_EQ(VnniActivationBlock(96), 32);
  EXPECT_EQ(VnniActivationBlock(64), 64);
  EXPECT_EQ(VnniActivationBlock(192), 64);
  EXPECT_EQ(VnniActivationBlock(128), 128);
  EXPECT_EQ(VnniActivationBlock(2560), 128);
}

TEST(VnniGemmTest, FourBitCodesOnInt8Activations) {
  if (IsasThisCpuRuns().empty()) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512 VNNI";
  std::mt19937 rng(5);
  for (const Shape& shape : kShapes) {
    for (const bool symmetric : {true, false}) {
      SCOPED_TRACE(::testing::Message() << shape.x_rows << " × " << shape.cols << " → "
                                        << shape.rows << (symmetric ? "" : ", zero points"));
      ExpectEveryIsaComputes(
          testing::RandomInt4VnniMatrix(shape.rows, shape.cols, shape.group_size, symmetric, rng),
          shape.x_rows, rng);
    }
  }
}

// A row's result does not depend on the other rows of the call (decode against a verify block or a
// batch): every tile shape adds a row's products in the same order.
TEST(VnniGemmTest, ARowsResultIsTheSameInAnyBatch) {
  if (IsasThisCpuRuns().empty()) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512 VNNI";
  std::mt19937 rng(13);
  const VnniMatrix w = testing::RandomInt4VnniMatrix(100, 512, 128, true, rng);
  constexpr int64_t kRows = 31;
  const std::vector<float> x = Normal(kRows * w.cols, rng);
  for (const VnniGemmIsa isa : IsasThisCpuRuns()) {
    SCOPED_TRACE(isa == VnniGemmIsa::kAvx2 ? "avx2" : "avx512 vnni");
    std::vector<float> batch(kRows * w.rows);
    VnniGemm(x.data(), kRows, w, batch.data(), ThreadPool::Shared(), isa);
    for (int64_t m = 0; m < kRows; ++m) {
      std::vector<float> alone(w.rows);
      VnniGemm(x.data() + m * w.cols, 1, w, alone.data(), ThreadPool::Shared(), isa);
      EXPECT_TRUE(std::equal(alone.begin(), alone.end(), batch.begin() + m * w.rows)) << m;
    }
  }
}

TEST(VnniGemmTest, EightBitRowsOnInt8Activations) {
  if (IsasThisCpuRuns().empty()) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512 VNNI";
  std::mt19937 rng(7);
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(::testing::Message()
                 << shape.x_rows << " × " << shape.cols << " → " << shape.rows);
    // Rows of very different magnitudes, each on its own scale.
    std::vector<float> weight = Normal(shape.rows * shape.cols, rng);
    for (int64_t n = 0; n < shape.rows; ++n) {
      for (int64_t k = 0; k < shape.cols; ++k)
        weight[n * shape.cols + k] *= std::ldexp(1.0f, n % 7);
    }
    const VnniMatrix w = QuantizeRowsForVnni(
        {.data = weight.data(), .bf16 = false, .rows = shape.rows, .cols = shape.cols});
    EXPECT_EQ(w.bits, 8);
    ExpectEveryIsaComputes(w, shape.x_rows, rng);
  }
}

// The 8-bit codes hold each weight to half a step of its row's absolute maximum / 127 (taken to
// half precision), and the extreme codes (±127, i.e. 1 and 255 unsigned) survive every ISA's sign
// handling.
TEST(VnniGemmTest, EightBitRowsHoldTheWeightToHalfAStep) {
  std::mt19937 rng(11);
  std::vector<float> weight = Normal(20 * 64, rng);
  weight[3] = 50.0f;
  weight[64 + 5] = -50.0f;
  const VnniMatrix w =
      QuantizeRowsForVnni({.data = weight.data(), .bf16 = false, .rows = 20, .cols = 64});
  const std::vector<float> held = Dequantize(w);
  for (int64_t n = 0; n < 20; ++n) {
    float amax = 0;
    for (int64_t k = 0; k < 64; ++k) amax = std::max(amax, std::fabs(weight[n * 64 + k]));
    for (int64_t k = 0; k < 64; ++k) {
      EXPECT_NEAR(held[n * 64 + k], weight[n * 64 + k], amax / 127 * 0.501) << n << ", " << k;
    }
  }
  EXPECT_NEAR(held[3], 50.0f, 50.0f * 0x1p-11f);
  EXPECT_EQ(held[64 + 5], -held[3]);
  if (IsasThisCpuRuns().empty()) return;
  ExpectEveryIsaComputes(w, 3, rng);
}

}  // namespace
}  // namespace specd::kernels::cpu
