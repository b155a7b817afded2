// The fake-quant Linear of QAD against the W4A16 serving path: what it packs is the grid it
// started from, what it computes is what the packed weight computes, and its gradient is
// straight-through.
#include "common/model/fake_quant_linear.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/optim/sgd.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/int4/int4_kernel_weight.h"
#include "common/model/linear.h"
#include "gtest/gtest.h"
#include "tests/unit/common/int4/random_int4_weight.h"
#include "tests/unit/common/model/tensor_matchers.h"

namespace specd::model {
namespace {

using quant::testing::Int4Layout;
using quant::testing::RandomPackedWeight;
using testing::AllClose;

// Every grid shape the checkpoints hold; cols and group sizes are multiples of 8 for the kernel.
const std::vector<Int4Layout>& Layouts() {
  static const std::vector<Int4Layout> layouts = {
      {.rows = 24, .cols = 128, .group_size = 32},
      {.rows = 20, .cols = 192, .group_size = 64, .symmetric = false},
      {.rows = 11, .cols = 96, .group_size = 96, .symmetric = false},  // channel-wise
      {.rows = 16, .cols = 256, .group_size = 64, .act_order = true},
      {.rows = 13, .cols = 128, .group_size = 32, .symmetric = false, .act_order = true},
      {.rows = 8, .cols = 64, .group_size = 16, .scale_dtype = io::DType::kF16},
      {.rows = 8, .cols = 64, .group_size = 16, .symmetric = false, .scale_dtype = io::DType::kF32},
  };
  return layouts;
}

std::string Describe(const Int4Layout& layout) {
  return std::to_string(layout.rows) + "x" + std::to_string(layout.cols) +
         " G=" + std::to_string(layout.group_size) + (layout.symmetric ? "" : " asymmetric") +
         (layout.act_order ? " act-order" : "") + " " + io::DTypeName(layout.scale_dtype);
}

FakeQuantLinear FromPacked(const quant::PackedInt4Weight& packed) {
  absl::StatusOr<FakeQuantLinear> linear = FakeQuantLinear::FromPacked(packed);
  EXPECT_TRUE(linear.ok()) << linear.status();
  return std::move(linear).value();  // throws, failing the test, when not ok
}

quant::PackedInt4Weight Pack(const FakeQuantLinear& linear) {
  absl::StatusOr<quant::PackedInt4Weight> packed = linear.Pack();
  EXPECT_TRUE(packed.ok()) << packed.status();
  return packed.ok() ? *std::move(packed) : quant::PackedInt4Weight();
}

at::Tensor DequantizedTensor(const quant::PackedInt4Weight& packed) {
  return at::tensor(quant::Dequantize(packed)).view({packed.grid.rows, packed.grid.cols});
}

// A training step's worth of drift: a few scales' worth, so codes move and some clamp.
void Perturb(FakeQuantLinear& linear) {
  at::NoGradGuard no_grad;
  linear.weight() += 0.02 * at::randn(linear.weight().sizes());
}

void ExpectSameGrid(const quant::Int4Grid& actual, const quant::Int4Grid& expected) {
  EXPECT_EQ(actual.rows, expected.rows);
  EXPECT_EQ(actual.cols, expected.cols);
  EXPECT_EQ(actual.group_size, expected.group_size);
  EXPECT_EQ(actual.scales, expected.scales);
  EXPECT_EQ(actual.scale_dtype, expected.scale_dtype);
  EXPECT_EQ(actual.zero_points, expected.zero_points);
  EXPECT_EQ(actual.group_index, expected.group_index);
}

TEST(FakeQuantLinearTest, StartsFromTheDequantizedWeightAndPacksBackToTheSameWords) {
  std::mt19937 rng(1);
  for (const Int4Layout& layout : Layouts()) {
    SCOPED_TRACE(Describe(layout));
    const quant::PackedInt4Weight original = RandomPackedWeight(layout, rng);
    FakeQuantLinear linear = FromPacked(original);
    EXPECT_TRUE(linear.weight().requires_grad());
    EXPECT_TRUE(at::equal(linear.weight().detach(), DequantizedTensor(original)));
    EXPECT_TRUE(at::equal(linear.QuantizedWeight(), DequantizedTensor(original)));
    const quant::PackedInt4Weight packed = Pack(linear);
    EXPECT_EQ(packed.packed, original.packed);
    ExpectSameGrid(packed.grid, original.grid);
  }
}

TEST(FakeQuantLinearTest, ForwardAfterTrainingEqualsTheW4A16LinearOfThePackedWeight) {
  std::mt19937 rng(2);
  at::manual_seed(2);
  for (const Int4Layout& layout : Layouts()) {
    SCOPED_TRACE(Describe(layout));
    const quant::PackedInt4Weight original = RandomPackedWeight(layout, rng);
    FakeQuantLinear linear = FromPacked(original);
    Perturb(linear);
    const quant::PackedInt4Weight packed = Pack(linear);
    EXPECT_NE(packed.packed, original.packed) << "the perturbation moved no code";
    ExpectSameGrid(packed.grid, original.grid);
    // The weight the forward multiplies by is the one that ships, bit for bit.
    EXPECT_TRUE(at::equal(linear.QuantizedWeight(), DequantizedTensor(packed)));

    absl::StatusOr<quant::Int4KernelWeight> kernel = quant::Int4KernelWeight::Prepare(packed);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    const Linear w4a16("w4a16",
                       std::make_shared<const quant::Int4KernelWeight>(*std::move(kernel)));
    for (const at::Tensor& x :
         {at::randn({5, layout.cols}), at::randn({layout.cols}), at::randn({2, 3, layout.cols})}) {
      const at::Tensor expected = w4a16.Forward(x);
      // float32 sums of K products in different orders: relative to the output's scale.
      EXPECT_TRUE(
          AllClose(linear.Forward(x), expected, 1e-5 * expected.abs().max().item<double>()));
    }
  }
}

TEST(FakeQuantLinearTest, GradientPassesStraightThroughAlsoWhereCodesClamp) {
  std::mt19937 rng(3);
  at::manual_seed(3);
  for (const Int4Layout& layout : Layouts()) {
    SCOPED_TRACE(Describe(layout));
    FakeQuantLinear linear = FromPacked(RandomPackedWeight(layout, rng));
    {
      at::NoGradGuard no_grad;
      linear.weight()[0] += 10.0;  // far past code 7: clamped
      linear.weight()[1] -= 10.0;  // far past code -8
    }
    for (const int64_t batch : {6, 1}) {  // one row: a decode step, Project's GEMV case
      const at::Tensor x = at::randn({batch, layout.cols});
      const at::Tensor upstream = at::randn({batch, layout.rows});
      linear.weight().mutable_grad() = at::Tensor();
      (linear.Forward(x) * upstream).sum().backward();

      // What a dense weight Q(W) receives: upstreamᵀ · x.
      const at::Tensor dense = linear.QuantizedWeight().requires_grad_();
      (at::linear(x, dense) * upstream).sum().backward();
      ASSERT_TRUE(linear.weight().grad().defined());
      EXPECT_TRUE(AllClose(linear.weight().grad(), upstream.t().mm(x), 1e-5));
      EXPECT_TRUE(AllClose(linear.weight().grad(), dense.grad(), 1e-6));
    }
  }
}

TEST(FakeQuantLinearTest, AWeightBeyondTheGridClampsToTheEndCodesInPackAndForward) {
  std::mt19937 rng(4);
  const quant::PackedInt4Weight original =
      RandomPackedWeight({.rows = 4, .cols = 64, .group_size = 16, .symmetric = false}, rng);
  FakeQuantLinear linear = FromPacked(original);
  {
    at::NoGradGuard no_grad;
    linear.weight()[0].fill_(1e3);
    linear.weight()[1].fill_(-1e3);
  }
  const quant::PackedInt4Weight packed = Pack(linear);
  const std::vector<int8_t> codes = quant::UnpackInt4(packed);
  const std::vector<int8_t> unchanged = quant::UnpackInt4(original);
  const int64_t cols = original.grid.cols;
  for (int64_t k = 0; k < cols; ++k) {
    EXPECT_EQ(codes[k], quant::kInt4Max) << k;
    EXPECT_EQ(codes[cols + k], quant::kInt4Min) << k;
  }
  EXPECT_EQ(std::vector<int8_t>(codes.begin() + 2 * cols, codes.end()),
            std::vector<int8_t>(unchanged.begin() + 2 * cols, unchanged.end()));

  // The identity times Q(W)ᵀ is Q(W)ᵀ: the clamped rows are (7 - z) · s and (-8 - z) · s.
  const at::Tensor forward_weight = linear.Forward(at::eye(cols)).t();
  EXPECT_TRUE(at::equal(forward_weight.detach(), DequantizedTensor(packed)));
}

TEST(FakeQuantLinearTest, AnOptimizerStepMovesTheWeightButNotTheGrid) {
  std::mt19937 rng(5);
  at::manual_seed(5);
  const quant::PackedInt4Weight original = RandomPackedWeight(
      {.rows = 16, .cols = 128, .group_size = 32, .symmetric = false, .act_order = true}, rng);
  FakeQuantLinear linear = FromPacked(original);
  const at::Tensor start = linear.weight().detach().clone();
  torch::optim::SGD sgd({linear.weight()}, torch::optim::SGDOptions(/*lr=*/0.5));
  const at::Tensor x = at::randn({32, 128});
  const at::Tensor target = at::randn({32, 16});
  for (int step = 0; step < 3; ++step) {
    sgd.zero_grad();
    (linear.Forward(x) - target).pow(2).mean().backward();
    sgd.step();
  }
  EXPECT_FALSE(at::equal(linear.weight().detach(), start));
  EXPECT_TRUE(linear.weight().requires_grad());
  const quant::PackedInt4Weight packed = Pack(linear);
  EXPECT_NE(packed.packed, original.packed);
  ExpectSameGrid(packed.grid, original.grid);
  EXPECT_TRUE(at::equal(linear.QuantizedWeight(), DequantizedTensor(packed)));
}

TEST(FakeQuantLinearTest, AGroupWithScaleZeroPacksItsZeroPointAndContributesNothing) {
  std::mt19937 rng(6);
  quant::Int4Grid grid = quant::testing::RandomGrid(
      {.rows = 2, .cols = 32, .group_size = 16, .symmetric = false}, rng);
  grid.scales[0] = 0.0f;  // row 0, columns 0..15
  absl::StatusOr<quant::PackedInt4Weight> original =
      quant::PackInt4(grid, quant::testing::RandomCodes(2 * 32, rng));
  ASSERT_TRUE(original.ok()) << original.status();
  FakeQuantLinear linear = FromPacked(*original);
  Perturb(linear);
  const std::vector<int8_t> codes = quant::UnpackInt4(Pack(linear));
  for (int64_t k = 0; k < 16; ++k) EXPECT_EQ(codes[k], grid.zero_points[0]) << k;
  const at::Tensor forward_weight = linear.Forward(at::eye(32)).t();
  EXPECT_TRUE(at::equal(forward_weight.slice(1, 0, 16)[0], at::zeros({16})));
  EXPECT_TRUE(at::isfinite(forward_weight).all().item<bool>());
}

TEST(FakeQuantLinearTest, RefusesToPackANonFiniteWeight) {
  std::mt19937 rng(7);
  FakeQuantLinear linear =
      FromPacked(RandomPackedWeight({.rows = 4, .cols = 32, .group_size = 32}, rng));
  {
    at::NoGradGuard no_grad;
    linear.weight()[2][5] = std::numeric_limits<float>::quiet_NaN();
  }
  EXPECT_EQ(linear.Pack().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(FakeQuantLinearTest, RefusesPackedWordsThatDoNotFitTheGrid) {
  std::mt19937 rng(8);
  quant::PackedInt4Weight packed =
      RandomPackedWeight({.rows = 4, .cols = 32, .group_size = 32}, rng);
  packed.packed.pop_back();
  EXPECT_EQ(FakeQuantLinear::FromPacked(packed).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace specd::model
