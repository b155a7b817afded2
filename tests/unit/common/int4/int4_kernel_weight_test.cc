#include "common/int4/int4_kernel_weight.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/bf16_gemm.h"
#include "kernels/cpu/vnni_gemm.h"
#include "tests/unit/common/int4/random_int4_weight.h"

namespace specd::quant {
namespace {

using ::specd::quant::testing::Int4Layout;
using ::specd::quant::testing::RandomPackedWeight;

// fp32 sums of K products against the float64 product of the dequantized weight (see
// tests/unit/kernels/w4a16_gemm_test.cc for the bound).
constexpr double kRelativeTolerance = 2e-6;

TEST(Int4KernelWeightTest, DequantizesToTheCheckpointsWeightInTheInputsColumnOrder) {
  std::mt19937 rng(9);
  for (const Int4Layout& layout : std::vector<Int4Layout>{
           {.rows = 5, .cols = 64, .group_size = 32},
           {.rows = 7, .cols = 96, .group_size = 32, .symmetric = false},
           {.rows = 6, .cols = 128, .group_size = 32, .symmetric = false, .act_order = true}}) {
    const PackedInt4Weight weight = RandomPackedWeight(layout, rng);
    const absl::StatusOr<Int4KernelWeight> prepared = Int4KernelWeight::Prepare(weight);
    ASSERT_TRUE(prepared.ok()) << prepared.status();
    EXPECT_EQ(prepared->Dequantize(), Dequantize(weight)) << layout.cols;
  }
}

TEST(Int4KernelWeightTest, MultiplyEqualsTheProductWithTheDequantizedWeight) {
  std::mt19937 rng(5);
  kernels::cpu::ThreadPool pool(2);
  for (const Int4Layout& layout : std::vector<Int4Layout>{
           {.rows = 37, .cols = 256, .group_size = 128},
           {.rows = 20, .cols = 192, .group_size = 32, .symmetric = false},
           {.rows = 11, .cols = 96, .group_size = 96, .symmetric = false},  // channel-wise
           {.rows = 29, .cols = 256, .group_size = 64, .act_order = true},
           {.rows = 16, .cols = 128, .group_size = 32, .symmetric = false, .act_order = true}}) {
    const PackedInt4Weight weight = RandomPackedWeight(layout, rng);
    const absl::StatusOr<Int4KernelWeight> prepared = Int4KernelWeight::Prepare(weight);
    ASSERT_TRUE(prepared.ok()) << prepared.status();
    const std::vector<float> dense = Dequantize(weight);
    for (int64_t batch : {1, 3, 16}) {
      std::normal_distribution<float> normal;
      std::vector<float> x(batch * layout.cols);
      for (float& v : x) v = normal(rng);
      std::vector<float> y(batch * layout.rows, NAN);
      prepared->Multiply(x.data(), batch, y.data(), pool);
      for (int64_t m = 0; m < batch; ++m) {
        for (int64_t n = 0; n < layout.rows; ++n) {
          double exact = 0, magnitude = 0;
          for (int64_t k = 0; k < layout.cols; ++k) {
            const double product = double{x[m * layout.cols + k]} * dense[n * layout.cols + k];
            exact += product;
            magnitude += std::abs(product);
          }
          ASSERT_LE(std::abs(y[m * layout.rows + n] - exact), kRelativeTolerance * magnitude)
              << layout.rows << "x" << layout.cols << " G=" << layout.group_size
              << (layout.act_order ? " act-order" : "") << " M=" << batch << " [" << m << ", " << n
              << "]";
        }
      }
    }
  }
}

TEST(Int4KernelWeightTest, HoldsHalfAByteAWeightPlusScales) {
  std::mt19937 rng(6);
  const absl::StatusOr<Int4KernelWeight> prepared = Int4KernelWeight::Prepare(
      RandomPackedWeight({.rows = 256, .cols = 1024, .group_size = 128}, rng));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(prepared->ByteSize(), 256 * 1024 / 2 + 256 * 8 * sizeof(float));
}

// The activation modes this CPU runs other than the exact one.
std::vector<Int4Activations> RoundingModesThisCpuRuns() {
  std::vector<Int4Activations> modes;
  if (kernels::cpu::CpuHasBf16Gemm()) modes.push_back(Int4Activations::kBf16);
  if (kernels::cpu::BestVnniGemmIsa() != kernels::cpu::VnniGemmIsa::kNone) {
    modes.push_back(Int4Activations::kInt8);
  }
  return modes;
}

// For bf16 and int8 activations the VNNI layout keeps the scales in half precision, exact for a
// checkpoint's bf16 or f16 ones, and zero codes only where the weight has zero points.
TEST(Int4KernelWeightTest, RoundingModesHoldTheSameWeightWithHalfScales) {
  if (RoundingModesThisCpuRuns().empty()) GTEST_SKIP() << "this CPU has no AVX2";
  for (const Int4Activations mode : RoundingModesThisCpuRuns()) {
    SCOPED_TRACE(Int4ActivationsName(mode));
    std::mt19937 rng(8);
    for (const Int4Layout& layout : std::vector<Int4Layout>{
             {.rows = 37, .cols = 256, .group_size = 128},
             {.rows = 20, .cols = 192, .group_size = 32, .symmetric = false},
             {.rows = 16, .cols = 128, .group_size = 64, .scale_dtype = io::DType::kF16},
             {.rows = 29, .cols = 256, .group_size = 64, .symmetric = false, .act_order = true}}) {
      const PackedInt4Weight weight = RandomPackedWeight(layout, rng);
      const absl::StatusOr<Int4KernelWeight> prepared = Int4KernelWeight::Prepare(weight, mode);
      ASSERT_TRUE(prepared.ok()) << prepared.status();
      EXPECT_EQ(prepared->activations(), mode);
      EXPECT_EQ(prepared->Dequantize(), Dequantize(weight)) << layout.rows << "x" << layout.cols;
    }
    const Int4Layout shape{.rows = 256, .cols = 1024, .group_size = 128};
    const absl::StatusOr<Int4KernelWeight> symmetric =
        Int4KernelWeight::Prepare(RandomPackedWeight(shape, rng), mode);
    Int4Layout with_zero_points = shape;
    with_zero_points.symmetric = false;
    const absl::StatusOr<Int4KernelWeight> asymmetric =
        Int4KernelWeight::Prepare(RandomPackedWeight(with_zero_points, rng), mode);
    ASSERT_TRUE(symmetric.ok() && asymmetric.ok());
    EXPECT_EQ(symmetric->ByteSize(), 256 * 1024 / 2 + 256 * 8 * 2);
    EXPECT_EQ(asymmetric->ByteSize(), 256 * 1024 / 2 + 256 * 8 * (2 + 1));
  }
}

TEST(Int4KernelWeightTest, RefusesLayoutsTheKernelDoesNotRun) {
  std::mt19937 rng(7);
  EXPECT_THAT(
      Int4KernelWeight::Prepare(RandomPackedWeight({.rows = 4, .cols = 100, .group_size = 10}, rng))
          .status()
          .message(),
      ::testing::HasSubstr("multiples of 8"));

  PackedInt4Weight uneven_groups =
      RandomPackedWeight({.rows = 4, .cols = 32, .group_size = 16, .act_order = true}, rng);
  uneven_groups.grid.group_index.assign(32, 0);
  uneven_groups.grid.group_index.back() = 1;  // 31 columns in group 0, 1 in group 1
  EXPECT_THAT(Int4KernelWeight::Prepare(uneven_groups).status().message(),
              ::testing::HasSubstr("every act-order group to hold 16 columns"));
}

}  // namespace
}  // namespace specd::quant
