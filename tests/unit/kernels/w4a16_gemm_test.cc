#include "kernels/cpu/w4a16_gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace specd::kernels::cpu {
namespace {

// A random INT4 matrix in the kernel's layout, with its weights decoded straight from the
// definition: nibble k % 8 of word [n, k / 8] is q + 8; W = (q - zero) · scale.
struct RandomInt4Matrix {
  RandomInt4Matrix(int64_t rows, int64_t cols, int64_t group_size, bool symmetric,
                   std::mt19937& rng)
      : packed(rows * cols / 8), scales(rows * (cols / group_size)) {
    for (int32_t& word : packed) word = static_cast<int32_t>(rng());
    std::uniform_real_distribution<float> scale(1e-3f, 1e-1f);
    for (float& s : scales) s = scale(rng);
    if (!symmetric) {
      zero_points.resize(scales.size());
      for (int8_t& zero : zero_points) zero = static_cast<int8_t>(static_cast<int>(rng() % 16) - 8);
    }
    matrix = {.packed = packed.data(),
              .scales = scales.data(),
              .zero_points = symmetric ? nullptr : zero_points.data(),
              .rows = rows,
              .cols = cols,
              .group_size = group_size};
  }

  double Weight(int64_t n, int64_t k) const {
    const uint32_t word = static_cast<uint32_t>(packed[n * matrix.cols / 8 + k / 8]);
    const int q = static_cast<int>((word >> (4 * (k % 8))) & 0xF) - 8;
    const int64_t at = n * (matrix.cols / matrix.group_size) + k / matrix.group_size;
    const int zero = zero_points.empty() ? 0 : zero_points[at];
    return static_cast<double>(q - zero) * scales[at];
  }

  std::vector<int32_t> packed;
  std::vector<float> scales;
  std::vector<int8_t> zero_points;
  Int4Matrix matrix;
};

std::vector<float> RandomActivations(int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(rows * cols);
  for (float& v : x) v = normal(rng);
  return x;
}

std::vector<Int4GemmIsa> IsasThisCpuRuns() {
  std::vector<Int4GemmIsa> isas = {Int4GemmIsa::kScalar};
  if (BestInt4GemmIsa() != Int4GemmIsa::kScalar) isas.push_back(Int4GemmIsa::kAvx2Fma);
  if (BestInt4GemmIsa() == Int4GemmIsa::kAvx512) isas.push_back(Int4GemmIsa::kAvx512);
  return isas;
}

const char* IsaName(Int4GemmIsa isa) {
  switch (isa) {
    case Int4GemmIsa::kScalar:
      return "scalar";
    case Int4GemmIsa::kAvx2Fma:
      return "avx2";
    case Int4GemmIsa::kAvx512:
      return "avx512";
  }
  return "?";
}

struct Shape {
  int64_t rows;  // N
  int64_t cols;  // K
  int64_t group_size;
};

// Odd N (tile tails), K not a multiple of 16 (AVX-512 falls back), channel-wise (G = K), and the
// Qwen3.5 group size.
constexpr Shape kShapes[] = {{1, 8, 8},     {3, 16, 8},    {7, 64, 16},    {13, 128, 32},
                             {9, 40, 8},    {33, 96, 32},  {37, 256, 128}, {64, 384, 128},
                             {5, 640, 640}, {130, 512, 64}};
constexpr int64_t kBatchRows[] = {1, 2, 3, 4, 5, 7, 8, 16, 31, 32, 33, 64, 100, 130};

// Every output is an fp32 sum of K products, |error| <= c · eps · Σ|x·w| with c growing with the
// terms each lane adds up; 2e-6 is ~17 eps (the largest seen over these cases is below 3e-7).
constexpr double kRelativeTolerance = 2e-6;

TEST(W4A16GemmTest, MatchesTheFloat64DequantizedProductForEveryShapeBatchAndIsa) {
  std::mt19937 rng(7);
  ThreadPool pool(2);
  for (const Shape& shape : kShapes) {
    for (bool symmetric : {true, false}) {
      const RandomInt4Matrix w(shape.rows, shape.cols, shape.group_size, symmetric, rng);
      for (int64_t batch : kBatchRows) {
        const std::vector<float> x = RandomActivations(batch, shape.cols, rng);
        for (Int4GemmIsa isa : IsasThisCpuRuns()) {
          std::vector<float> y(batch * shape.rows, NAN);
          W4A16Gemm(x.data(), batch, w.matrix, y.data(), pool, isa);
          double worst = 0;
          for (int64_t m = 0; m < batch; ++m) {
            for (int64_t n = 0; n < shape.rows; ++n) {
              double exact = 0, magnitude = 0;
              for (int64_t k = 0; k < shape.cols; ++k) {
                exact += x[m * shape.cols + k] * w.Weight(n, k);
                magnitude += std::abs(x[m * shape.cols + k] * w.Weight(n, k));
              }
              const double error = std::abs(y[m * shape.rows + n] - exact) / magnitude;
              if (!(error <= worst)) worst = error;  // a NaN output sticks
            }
          }
          EXPECT_LE(worst, kRelativeTolerance)
              << IsaName(isa) << " N=" << shape.rows << " K=" << shape.cols
              << " G=" << shape.group_size << " M=" << batch << (symmetric ? " sym" : " asym");
        }
      }
    }
  }
}

TEST(W4A16GemmTest, VectorBodiesAgreeWithTheScalarFallback) {
  std::mt19937 rng(11);
  ThreadPool pool(2);
  const RandomInt4Matrix w(67, 1024, 128, /*symmetric=*/false, rng);
  for (int64_t batch : kBatchRows) {
    const std::vector<float> x = RandomActivations(batch, w.matrix.cols, rng);
    std::vector<float> scalar(batch * w.matrix.rows);
    W4A16Gemm(x.data(), batch, w.matrix, scalar.data(), pool, Int4GemmIsa::kScalar);
    for (Int4GemmIsa isa : IsasThisCpuRuns()) {
      std::vector<float> vector(batch * w.matrix.rows);
      W4A16Gemm(x.data(), batch, w.matrix, vector.data(), pool, isa);
      for (int64_t m = 0; m < batch; ++m) {
        for (int64_t n = 0; n < w.matrix.rows; ++n) {
          double magnitude = 0;
          for (int64_t k = 0; k < w.matrix.cols; ++k) {
            magnitude += std::abs(x[m * w.matrix.cols + k] * w.Weight(n, k));
          }
          // Both are within kRelativeTolerance of the exact sum.
          EXPECT_NEAR(vector[m * w.matrix.rows + n], scalar[m * w.matrix.rows + n],
                      2 * kRelativeTolerance * magnitude)
              << IsaName(isa) << " M=" << batch << " [" << m << ", " << n << "]";
        }
      }
    }
  }
}

// A row's result does not depend on the other rows of the call, bit for bit: a decode step's
// against a verify block's or a batch's, one tile or a panel (from 32 rows), one block of rows
// or several (K = 4096 takes 32 rows a block).
TEST(W4A16GemmTest, ARowsResultIsTheSameInAnyBatch) {
  std::mt19937 rng(17);
  ThreadPool pool(2);
  const RandomInt4Matrix w(37, 4096, 128, /*symmetric=*/false, rng);
  constexpr int64_t kRows = 70;
  const std::vector<float> x = RandomActivations(kRows, w.matrix.cols, rng);
  for (const Int4GemmIsa isa : IsasThisCpuRuns()) {
    SCOPED_TRACE(IsaName(isa));
    for (const int64_t rows : {int64_t{16}, kRows}) {
      std::vector<float> batch(rows * w.matrix.rows);
      W4A16Gemm(x.data(), rows, w.matrix, batch.data(), pool, isa);
      for (int64_t m = 0; m < rows; ++m) {
        std::vector<float> alone(w.matrix.rows);
        W4A16Gemm(x.data() + m * w.matrix.cols, 1, w.matrix, alone.data(), pool, isa);
        EXPECT_TRUE(std::equal(alone.begin(), alone.end(), batch.begin() + m * w.matrix.rows))
            << "row " << m << " of " << rows;
      }
    }
  }
}

TEST(W4A16GemmTest, ThreadCountDoesNotChangeTheResult) {
  std::mt19937 rng(13);
  const RandomInt4Matrix w(101, 256, 32, /*symmetric=*/true, rng);
  const std::vector<float> x = RandomActivations(5, w.matrix.cols, rng);
  std::vector<float> one_thread(5 * w.matrix.rows);
  ThreadPool single(1);
  W4A16Gemm(x.data(), 5, w.matrix, one_thread.data(), single);
  for (int threads : {2, 3, 8}) {
    ThreadPool pool(threads);
    std::vector<float> split(5 * w.matrix.rows);
    W4A16Gemm(x.data(), 5, w.matrix, split.data(), pool);
    EXPECT_EQ(split, one_thread) << threads << " threads";
  }
}

}  // namespace
}  // namespace specd::kernels::cpu
