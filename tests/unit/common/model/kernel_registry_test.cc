// The kernel registry runs a replacement where one is registered for the input's device, the
// composition otherwise, and every CPU replacement of Project computes what the composition does.
#include "common/model/kernel_registry.h"

#include <ATen/ATen.h>

#include "common/model/linear.h"
#include "gtest/gtest.h"
#include "tests/unit/common/model/tensor_matchers.h"

namespace specd::model {
namespace {

using testing::AllClose;

at::Tensor Doubled(const at::Tensor& x, const at::Tensor&) { return 2 * x; }
at::Tensor Tripled(const at::Tensor& x, const at::Tensor&) { return 3 * x; }

TEST(KernelChoiceTest, RunsTheReplacementForItsDeviceAndTheCompositionElsewhere) {
  KernelChoice<ProjectFn> choice(&Doubled);
  choice.Replace(c10::DeviceType::CUDA, &Tripled);
  EXPECT_EQ(choice.For(c10::DeviceType::CPU), &Doubled);
  EXPECT_EQ(choice.For(c10::DeviceType::CUDA), &Tripled);
  choice.RemoveReplacements();
  EXPECT_EQ(choice.For(c10::DeviceType::CUDA), &Doubled);
}

// Rows, columns: GEMV tiles of four rows and eight columns, with ragged edges.
class CpuProjectTest : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(CpuProjectTest, EqualsTheCompositionForOneRow) {
  const auto [rows, cols] = GetParam();
  at::manual_seed(rows * 1000 + cols);
  const at::Tensor weight = at::randn({rows, cols});
  const at::Tensor x = at::randn({1, 1, cols});
  const auto& choice = KernelRegistry::Get().project;
  ASSERT_NE(choice.For(c10::DeviceType::CPU), choice.composition());
  const at::Tensor expected = choice.composition()(x, weight);
  const at::Tensor actual = choice.For(c10::DeviceType::CPU)(x, weight);
  EXPECT_EQ(actual.sizes(), expected.sizes());
  EXPECT_TRUE(AllClose(actual, expected, 1e-4));
}

INSTANTIATE_TEST_SUITE_P(Shapes, CpuProjectTest,
                         ::testing::Values(std::tuple{1, 1}, std::tuple{3, 7}, std::tuple{8, 16},
                                           std::tuple{37, 300}, std::tuple{256, 1024}));

TEST(CpuProjectTest, LeavesSeveralRowsOtherDtypesAndGradientsToTheComposition) {
  const at::Tensor weight = at::randn({5, 16});
  const auto& project = *KernelRegistry::Get().project.For(c10::DeviceType::CPU);
  const at::Tensor rows = at::randn({3, 16});
  EXPECT_TRUE(at::equal(project(rows, weight), ProjectComposition(rows, weight)));
  const at::Tensor bf16_weight = weight.to(at::kBFloat16), bf16_row = rows[0].to(at::kBFloat16);
  EXPECT_TRUE(at::equal(project(bf16_row, bf16_weight), ProjectComposition(bf16_row, bf16_weight)));
  const at::Tensor trained = weight.clone().requires_grad_();
  project(rows[0], trained).sum().backward();
  EXPECT_TRUE(at::equal(trained.grad(), rows[0].expand({5, 16})));
}

}  // namespace
}  // namespace specd::model
