#include "common/model/fake_quant_linear.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <span>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model/ops/ops.h"

namespace specd::model {
namespace {

// Row-major `values` as a float32 [rows, cols] tensor.
template <typename T>
at::Tensor FloatMatrix(const std::vector<T>& values, int64_t rows, int64_t cols) {
  return at::tensor(values).to(at::kFloat).view({rows, cols});
}

}  // namespace

absl::StatusOr<FakeQuantLinear> FakeQuantLinear::FromPacked(const quant::PackedInt4Weight& packed) {
  const quant::Int4Grid& grid = packed.grid;
  if (absl::Status valid = quant::ValidateInt4Grid(grid); !valid.ok()) return valid;
  const int64_t words = grid.rows * quant::Int4WordCount(grid.cols);
  if (static_cast<int64_t>(packed.packed.size()) != words) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", words, " packed words, got ", packed.packed.size()));
  }
  try {
    std::vector<int64_t> group_of(grid.cols);
    for (int64_t k = 0; k < grid.cols; ++k) group_of[k] = grid.GroupOf(k);
    const at::Tensor groups = at::tensor(group_of);
    const auto per_column = [&](const at::Tensor& per_group) {
      return per_group.index_select(1, groups).contiguous();
    };
    FakeQuantLinear linear;
    linear.grid_ = grid;
    linear.weight_ = FloatMatrix(quant::Dequantize(packed), grid.rows, grid.cols).requires_grad_();
    linear.scale_ = per_column(FloatMatrix(grid.scales, grid.rows, grid.groups()));
    if (!grid.symmetric()) {
      linear.zero_ = per_column(FloatMatrix(grid.zero_points, grid.rows, grid.groups()));
    }
    return linear;
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("building the fake-quant linear: ", e.what_without_backtrace()));
  }
}

// In float32, rounding half to even (at::round), as torch.round in compressed-tensors' and
// GPTQ's quantizers does. A group with scale 0 holds only zeros: its codes are z.
at::Tensor FakeQuantLinear::Codes() const {
  at::Tensor codes = at::round(at::where(scale_ != 0, weight_.detach() / scale_, 0.0));
  if (zero_.defined()) codes += zero_;
  return codes.clamp_(quant::kInt4Min, quant::kInt4Max);
}

// (q - z) · s, in Dequantize's order, so Forward multiplies by the weight Pack ships bit for bit.
at::Tensor FakeQuantLinear::QuantizedWeight() const {
  return zero_.defined() ? (Codes() - zero_) * scale_ : Codes() * scale_;
}

at::Tensor FakeQuantLinear::Forward(const at::Tensor& x) const {
  // W - W.detach() is exactly 0 with gradient 1: the value is Q(W), the gradient straight-through.
  return ops::Project(x, QuantizedWeight() + (weight_ - weight_.detach()));
}

absl::StatusOr<quant::PackedInt4Weight> FakeQuantLinear::Pack() const {
  try {
    if (!at::isfinite(weight_).all().item<bool>()) {
      return absl::FailedPreconditionError("the fake-quant weight has non-finite values");
    }
    const at::Tensor codes = Codes().to(at::kChar).contiguous();
    return quant::PackInt4(grid_, std::span<const int8_t>(codes.data_ptr<int8_t>(), codes.numel()));
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("packing the fake-quant weight: ", e.what_without_backtrace()));
  }
}

}  // namespace specd::model
