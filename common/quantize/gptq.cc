#include "common/quantize/gptq.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/int4/float_encoding.h"

namespace specd::quant {
namespace {

std::string ShapeString(const at::Tensor& tensor) {
  return absl::StrCat("[", absl::StrJoin(tensor.sizes(), ", "), "]");
}

// round(clamp(value, −8, 7)) with ties to even, as torch.round and rtn.cc.
int8_t RoundToInt4(float value) {
  return static_cast<int8_t>(std::nearbyint(std::clamp(value, float{kInt4Min}, float{kInt4Max})));
}

absl::Status CheckArguments(const at::Tensor& weight, const at::Tensor& hessian,
                            const GptqOptions& options) {
  if (!weight.defined() || weight.dim() != 2 || !weight.is_floating_point() ||
      weight.numel() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPTQ needs a non-empty float weight [out, in], got ",
                     weight.defined() ? ShapeString(weight) : std::string("an undefined tensor")));
  }
  const int64_t cols = weight.size(1);
  if (!hessian.defined() || !hessian.is_floating_point() || hessian.dim() != 2 ||
      hessian.size(0) != cols || hessian.size(1) != cols) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the Hessian of a weight ", ShapeString(weight), " must be a float [", cols, ", ", cols,
        "], got ", hessian.defined() ? ShapeString(hessian) : std::string("an undefined tensor")));
  }
  if (options.group_size < 0 || (options.group_size > 0 && cols % options.group_size != 0)) {
    return absl::InvalidArgumentError(absl::StrCat("group size ", options.group_size,
                                                   " does not divide the ", cols,
                                                   " input columns (0: one scale per row)"));
  }
  if (options.block_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the GPTQ block size must be positive, got ", options.block_size));
  }
  if (!(options.damp >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the GPTQ damping must be non-negative, got ", options.damp));
  }
  if (!IsScaleDType(options.scale_dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scales cannot be stored as ", io::DTypeName(options.scale_dtype), " (F32, BF16 or F16)"));
  }
  return absl::OkStatus();
}

// The upper Cholesky factor of H⁻¹ (float32), H damped, as the reference's
// `cholesky(cholesky_inverse(cholesky(H)), upper=True)`. Damps `hessian` in place.
absl::StatusOr<at::Tensor> InverseHessianFactor(at::Tensor hessian, double damp) {
  const at::Tensor diagonal = hessian.diagonal();
  diagonal.add_(damp * diagonal.mean().item<double>());
  auto [lower, info] = at::linalg_cholesky_ex(hessian);
  if (info.item<int64_t>() != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the Hessian is not positive definite after damping by ", damp,
                     " of its mean diagonal (leading minor ", info.item<int64_t>(),
                     "): more calibration data or a larger damping"));
  }
  auto [upper, inverse_info] = at::linalg_cholesky_ex(at::cholesky_inverse(lower), /*upper=*/true);
  if (inverse_info.item<int64_t>() != 0) {
    return absl::FailedPreconditionError(
        "the inverse Hessian is not numerically positive definite: a larger damping");
  }
  return upper.to(at::kFloat).contiguous();
}

// One group's scales and zero points, per row, from its current (error-updated) values.
struct GroupGrid {
  std::vector<float> scales;
  std::vector<float> zeros;  // all 0 when symmetric
};

// `values` [columns, rows] of one group.
GroupGrid FitGroup(const at::Tensor& values, const GptqOptions& options) {
  const at::Tensor mins = values.amin(0).contiguous(), maxs = values.amax(0).contiguous();
  const int64_t rows = values.size(1);
  GroupGrid grid{.scales = std::vector<float>(rows), .zeros = std::vector<float>(rows, 0.0f)};
  for (int64_t row = 0; row < rows; ++row) {
    const float min = std::min(mins.data_ptr<float>()[row], 0.0f);
    const float max = std::max(maxs.data_ptr<float>()[row], 0.0f);
    float scale = options.symmetric ? std::max(-min, max) / 7.0f : (max - min) / 15.0f;
    scale = RoundToDType(scale > 0 ? scale : 1.0f, options.scale_dtype);
    grid.scales[row] = scale;
    if (!options.symmetric) grid.zeros[row] = RoundToInt4(kInt4Min - min / scale);
  }
  return grid;
}

}  // namespace

HessianAccumulator::HessianAccumulator(int64_t in_features)
    : in_features_(in_features), hessian_(at::zeros({in_features, in_features}, at::kFloat)) {}

absl::Status HessianAccumulator::Add(const at::Tensor& x) {
  if (!x.defined() || x.dim() < 1 || x.size(-1) != in_features_ || !x.is_floating_point()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a Hessian of ", in_features_, " input features needs float rows [..., ", in_features_,
        "], got ", x.defined() ? ShapeString(x) : std::string("an undefined tensor")));
  }
  try {
    if (samples_ == 0) {
      hessian_ = hessian_.to(x.device());
    } else if (x.device() != hessian_.device()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rows on ", x.device().str(), " cannot add to a Hessian on ", hessian_.device().str()));
    }
    const at::Tensor rows = x.reshape({-1, in_features_}).to(at::kFloat);
    const int64_t added = rows.size(0);
    if (added == 0) return absl::OkStatus();
    const double total = static_cast<double>(samples_ + added);
    hessian_.mul_(static_cast<double>(samples_) / total);
    hessian_.addmm_(rows.t(), rows, /*beta=*/1.0, /*alpha=*/2.0 / total);
    samples_ += added;
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("accumulating a Hessian: ", e.what_without_backtrace()));
  }
  return absl::OkStatus();
}

absl::StatusOr<PackedInt4Weight> GptqQuantize(const at::Tensor& weight, const at::Tensor& hessian,
                                              const GptqOptions& options) {
  if (absl::Status valid = CheckArguments(weight, hessian, options); !valid.ok()) return valid;
  const int64_t rows = weight.size(0), cols = weight.size(1);
  const int64_t group_size = options.group_size == 0 ? cols : options.group_size;
  Int4Grid grid{.rows = rows,
                .cols = cols,
                .group_size = group_size,
                .scales = std::vector<float>(rows * (cols / group_size)),
                .scale_dtype = options.scale_dtype,
                .zero_points = {},
                .group_index = {}};
  if (!options.symmetric) grid.zero_points.resize(grid.scales.size());
  // Codes in processing order: column c here is input column order[c].
  std::vector<int8_t> codes(rows * cols);
  at::Tensor order;
  try {
    at::Tensor w = weight.to(at::kCPU, at::kFloat, /*non_blocking=*/false, /*copy=*/true);
    at::Tensor h = hessian.to(at::kCPU, at::kDouble, /*non_blocking=*/false, /*copy=*/true);
    if (!h.isfinite().all().item<bool>()) {
      return absl::InvalidArgumentError("the Hessian has values that are not finite");
    }
    // Inputs that never fired: any value fits them, so the column is zero.
    const at::Tensor dead = h.diagonal() == 0;
    h.diagonal().masked_fill_(dead, 1.0);
    w.masked_fill_(dead.unsqueeze(0), 0.0);
    if (options.act_order) {
      order = std::get<1>(at::sort(h.diagonal(), /*stable=*/true, /*dim=*/0, /*descending=*/true));
      w = w.index_select(1, order);
      h = h.index_select(0, order).index_select(1, order);
    }
    w = w.contiguous();
    absl::StatusOr<at::Tensor> hinv = InverseHessianFactor(h, options.damp);
    if (!hinv.ok()) return hinv.status();

    GroupGrid group;
    for (int64_t begin = 0; begin < cols; begin += options.block_size) {
      const int64_t end = std::min(begin + options.block_size, cols), count = end - begin;
      // The block column-major, [count, rows], so that a column and its updates are contiguous.
      at::Tensor block = w.slice(1, begin, end).t().contiguous();
      at::Tensor errors = at::zeros({count, rows}, at::kFloat);
      const at::Tensor block_hinv = hinv->slice(0, begin, end).slice(1, begin, end).contiguous();
      float* block_w = block.data_ptr<float>();
      float* block_err = errors.data_ptr<float>();
      const float* block_h = block_hinv.data_ptr<float>();
      for (int64_t i = 0; i < count; ++i) {
        const int64_t col = begin + i;
        if (col % group_size == 0) {
          // The group's current values: inside the block as updated so far, past it with the
          // lazy update of this block's errors applied.
          const int64_t group_end = col + group_size;
          at::Tensor values = block.slice(0, i, std::min(count, i + group_size));
          if (group_end > end) {
            const at::Tensor beyond =
                w.slice(1, end, group_end) -
                at::matmul(errors.t(), hinv->slice(0, begin, end).slice(1, end, group_end));
            values = at::cat({values, beyond.t()}, 0);
          }
          group = FitGroup(values, options);
          const int64_t g = col / group_size;
          for (int64_t row = 0; row < rows; ++row) {
            grid.scales[row * grid.groups() + g] = group.scales[row];
            if (!options.symmetric) {
              grid.zero_points[row * grid.groups() + g] = static_cast<int8_t>(group.zeros[row]);
            }
          }
        }
        float* column = block_w + i * rows;
        float* error = block_err + i * rows;
        const float diagonal = block_h[i * count + i];
        for (int64_t row = 0; row < rows; ++row) {
          const int8_t code = RoundToInt4(column[row] / group.scales[row] + group.zeros[row]);
          codes[row * cols + col] = code;
          const float quantized = (code - group.zeros[row]) * group.scales[row];
          error[row] = (column[row] - quantized) / diagonal;
        }
        for (int64_t j = i + 1; j < count; ++j) {
          const float coupling = block_h[i * count + j];
          float* later = block_w + j * rows;
          for (int64_t row = 0; row < rows; ++row) later[row] -= coupling * error[row];
        }
      }
      if (end < cols) {
        w.slice(1, end).addmm_(errors.t(), hinv->slice(0, begin, end).slice(1, end),
                               /*beta=*/1.0, /*alpha=*/-1.0);
      }
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("GPTQ: ", e.what_without_backtrace()));
  }

  if (!options.act_order) return PackInt4(std::move(grid), codes);
  // Back to the input's column order; column order[c] is in group c / group_size.
  const int64_t* input_column = order.data_ptr<int64_t>();
  std::vector<int8_t> input_codes(codes.size());
  grid.group_index.resize(cols);
  for (int64_t c = 0; c < cols; ++c) {
    grid.group_index[input_column[c]] = static_cast<int32_t>(c / group_size);
    for (int64_t row = 0; row < rows; ++row) {
      input_codes[row * cols + input_column[c]] = codes[row * cols + c];
    }
  }
  return PackInt4(std::move(grid), input_codes);
}

}  // namespace specd::quant
