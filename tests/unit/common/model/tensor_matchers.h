#pragma once
// Comparisons of model outputs against reference tensors, reporting the largest difference.
#include <ATen/ATen.h>

#include <string>

#include "common/io/safetensors_file.h"
#include "common/model/weight_reader.h"
#include "gtest/gtest.h"

namespace specd::model::testing {

inline double MaxAbsDiff(const at::Tensor& actual, const at::Tensor& expected) {
  return (actual.to(at::kDouble) - expected.to(at::kDouble)).abs().max().item<double>();
}

// Passes when shapes match and no element differs by more than `tolerance`; logs the largest
// difference so test output shows how close the paths are.
inline ::testing::AssertionResult AllClose(const at::Tensor& actual, const at::Tensor& expected,
                                           double tolerance) {
  if (actual.sizes() != expected.sizes()) {
    return ::testing::AssertionFailure()
           << "shape " << actual.sizes() << " differs from " << expected.sizes();
  }
  const double diff = MaxAbsDiff(actual, expected);
  ::testing::Test::RecordProperty("max_abs_diff", std::to_string(diff));
  if (diff > tolerance) {
    return ::testing::AssertionFailure() << "max |Δ| = " << diff << " > " << tolerance;
  }
  return ::testing::AssertionSuccess() << "max |Δ| = " << diff;
}

// A tensor of a reference file, as float32 or int64 on the CPU; fails the test if absent.
inline at::Tensor ReferenceTensor(const io::SafetensorsFile& file, const std::string& name) {
  const io::TensorView* view = file.Find(name);
  EXPECT_NE(view, nullptr) << name;
  if (view == nullptr) return at::Tensor();
  const bool integral = view->dtype == io::DType::kI64 || view->dtype == io::DType::kI32;
  absl::StatusOr<at::Tensor> tensor =
      TensorFromView(*view, integral ? at::kLong : at::kFloat, c10::kCPU);
  EXPECT_TRUE(tensor.ok()) << tensor.status();
  return tensor.ok() ? *tensor : at::Tensor();
}

}  // namespace specd::model::testing
