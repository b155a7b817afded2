#include "common/int4/int4_kernel_weight.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/bf16_gemm.h"

namespace specd::quant {

absl::StatusOr<Int4KernelWeight> Int4KernelWeight::Prepare(const PackedInt4Weight& weight,
                                                           Int4Activations activations) {
  const Int4Grid& grid = weight.grid;
  if (grid.cols % kInt4PerWord != 0 || grid.group_size % kInt4PerWord != 0) {
    return absl::UnimplementedError(absl::StrCat("the CPU INT4 kernel needs K (", grid.cols,
                                                 ") and the group size (", grid.group_size,
                                                 ") to be multiples of 8"));
  }
  if (activations == Int4Activations::kBf16 && !kernels::cpu::CpuHasBf16Gemm()) {
    return absl::FailedPreconditionError(
        "bf16 activations need a CPU with AVX512-BF16; this one has none");
  }
  if (activations == Int4Activations::kInt8) {
    if (kernels::cpu::BestVnniGemmIsa() == kernels::cpu::VnniGemmIsa::kNone) {
      return absl::FailedPreconditionError(
          "int8 activations need a CPU with AVX2 or AVX-512 VNNI; this one has neither");
    }
    if (grid.group_size % kernels::cpu::kVnniMinActivationBlock != 0) {
      return absl::UnimplementedError(
          absl::StrCat("int8 activations need a group size that is a multiple of ",
                       kernels::cpu::kVnniMinActivationBlock, ", not ", grid.group_size));
    }
  }
  absl::StatusOr<Int4KernelWeight> prepared = PrepareExact(weight);
  if (!prepared.ok() || activations == Int4Activations::kExact) return prepared;
  prepared->activations_ = activations;
  prepared->vnni_ = kernels::cpu::RepackInt4ForVnni(prepared->Matrix());
  // The VNNI layout replaces the exact one: give its memory back (assigning {} would only clear
  // the vectors, keeping their capacity: twice the weights resident).
  decltype(prepared->packed_)().swap(prepared->packed_);
  decltype(prepared->scales_)().swap(prepared->scales_);
  decltype(prepared->zero_points_)().swap(prepared->zero_points_);
  return prepared;
}

absl::StatusOr<Int4KernelWeight> Int4KernelWeight::PrepareExact(const PackedInt4Weight& weight) {
  const Int4Grid& grid = weight.grid;
  Int4KernelWeight prepared;
  prepared.rows_ = grid.rows;
  prepared.cols_ = grid.cols;
  prepared.group_size_ = grid.group_size;
  prepared.scales_.assign(grid.scales.begin(), grid.scales.end());
  prepared.zero_points_.assign(grid.zero_points.begin(), grid.zero_points.end());
  if (grid.group_index.empty()) {
    prepared.packed_.assign(weight.packed.begin(), weight.packed.end());
    return prepared;
  }

  std::vector<int32_t> order(grid.cols);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return grid.group_index[a] < grid.group_index[b]; });
  for (int64_t j = 0; j < grid.cols; ++j) {
    if (grid.group_index[order[j]] != j / grid.group_size) {
      return absl::UnimplementedError(
          absl::StrCat("the CPU INT4 kernel needs every act-order group to hold ", grid.group_size,
                       " columns; group ", j / grid.group_size, " does not"));
    }
  }
  const std::vector<int8_t> codes = UnpackInt4(weight);
  std::vector<int8_t> codes_in_group_order(codes.size());
  for (int64_t row = 0; row < grid.rows; ++row) {
    for (int64_t j = 0; j < grid.cols; ++j) {
      codes_in_group_order[row * grid.cols + j] = codes[row * grid.cols + order[j]];
    }
  }
  Int4Grid contiguous_groups = grid;
  contiguous_groups.group_index.clear();
  absl::StatusOr<PackedInt4Weight> repacked =
      PackInt4(std::move(contiguous_groups), codes_in_group_order);
  if (!repacked.ok()) return repacked.status();
  prepared.packed_.assign(repacked->packed.begin(), repacked->packed.end());
  prepared.input_order_ = std::move(order);
  return prepared;
}

void Int4KernelWeight::Multiply(const float* x, int64_t batch, float* y,
                                kernels::cpu::ThreadPool& pool,
                                kernels::cpu::Int4GemmIsa isa) const {
  // Act-order weights only: x in the group order the packed columns were sorted into.
  std::vector<float> gathered;
  if (!input_order_.empty()) {
    gathered.resize(batch * cols_);
    for (int64_t m = 0; m < batch; ++m) {
      for (int64_t j = 0; j < cols_; ++j) gathered[m * cols_ + j] = x[m * cols_ + input_order_[j]];
    }
    x = gathered.data();
  }
  switch (activations_) {
    case Int4Activations::kExact:
      return kernels::cpu::W4A16Gemm(x, batch, Matrix(), y, pool, isa);
    case Int4Activations::kBf16:
      return kernels::cpu::Bf16Gemm(x, batch, *vnni_, y, pool);
    case Int4Activations::kInt8:
      return kernels::cpu::VnniGemm(x, batch, *vnni_, y, pool);
  }
}

std::vector<float> Int4KernelWeight::Dequantize() const {
  // The packed words are a plain (group-contiguous) pack-quantized weight in kernel column order;
  // so are the VNNI layout's nibbles, in their own places.
  const std::vector<float> in_kernel_order =
      vnni_.has_value()
          ? kernels::cpu::Dequantize(*vnni_)
          : quant::Dequantize({.grid = {.rows = rows_,
                                        .cols = cols_,
                                        .group_size = group_size_,
                                        .scales = {scales_.begin(), scales_.end()},
                                        .scale_dtype = io::DType::kF32,
                                        .zero_points = {zero_points_.begin(), zero_points_.end()},
                                        .group_index = {}},
                               .packed = {packed_.begin(), packed_.end()}});
  if (input_order_.empty()) return in_kernel_order;
  std::vector<float> dense(in_kernel_order.size());
  for (int64_t row = 0; row < rows_; ++row) {
    for (int64_t j = 0; j < cols_; ++j) {
      dense[row * cols_ + input_order_[j]] = in_kernel_order[row * cols_ + j];
    }
  }
  return dense;
}

int64_t Int4KernelWeight::ByteSize() const {
  if (vnni_.has_value()) return vnni_->ByteSize();
  return packed_.size() * sizeof(int32_t) + scales_.size() * sizeof(float) + zero_points_.size();
}

kernels::cpu::Int4Matrix Int4KernelWeight::Matrix() const {
  return {.packed = packed_.data(),
          .scales = scales_.data(),
          .zero_points = zero_points_.empty() ? nullptr : zero_points_.data(),
          .rows = rows_,
          .cols = cols_,
          .group_size = group_size_};
}

}  // namespace specd::quant
