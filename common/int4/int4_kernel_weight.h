#pragma once
// A PackedInt4Weight laid out for the fused CPU kernel of its activations' mode: for exact ones
// (kernels/cpu/w4a16_gemm.h) the packed words keep the checkpoint's nibble order, scales are
// float32, zero points int8 per group; for bf16 and int8 ones the VNNI layout (kernels/cpu/
// vnni_gemm.h), which both their kernels read.
// An act-order weight (group_index) is repacked once, at load, with its columns sorted by
// group, so that every group is a contiguous run of group_size columns; each call then gathers
// the activations into the same order (K values per row against N·K weights).
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/int4/int4_activations.h"
#include "common/int4/packed_int4_weight.h"
#include "kernels/cpu/huge_pages.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/vnni_gemm.h"
#include "kernels/cpu/w4a16_gemm.h"

namespace specd::quant {

class Int4KernelWeight {
 public:
  // Needs cols and group_size to be multiples of 8 and, with a group index, exactly group_size
  // columns in every group (what GPTQ act-order writes); int8 activations also need a group size
  // that is a multiple of 32 and a CPU with AVX2 or AVX-512 VNNI, bf16 ones a CPU with AVX512-BF16
  // (FAILED_PRECONDITION without).
  static absl::StatusOr<Int4KernelWeight> Prepare(
      const PackedInt4Weight& weight, Int4Activations activations = Int4Activations::kExact);

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  Int4Activations activations() const { return activations_; }

  // y [batch, rows()] = x [batch, cols()] · Wᵀ, row-major float32.
  void Multiply(const float* x, int64_t batch, float* y,
                kernels::cpu::ThreadPool& pool = kernels::cpu::ThreadPool::Shared(),
                kernels::cpu::Int4GemmIsa isa = kernels::cpu::BestInt4GemmIsa()) const;

  // W [rows(), cols()] as float32, row-major, columns in the input's order: what Multiply
  // multiplies by, exactly with exact activations (the op table's reference projects through it).
  std::vector<float> Dequantize() const;

  // Resident bytes of the weight: packed words, scales and zero points.
  int64_t ByteSize() const;

  // Exact activations only (the others hold the VNNI layout instead): the packed words, scales and
  // zero points with the columns sorted by group, and the input column each sorted one reads
  // (empty: its own). What a device copy is made from (common/model/ops/int4_tensors.h).
  kernels::cpu::Int4Matrix Matrix() const;
  const std::vector<int32_t>& input_order() const { return input_order_; }

 private:
  Int4KernelWeight() = default;
  // The packed words, scales and zero points for exact activations, sorted by group.
  static absl::StatusOr<Int4KernelWeight> PrepareExact(const PackedInt4Weight& weight);

  int64_t rows_ = 0;
  int64_t cols_ = 0;
  int64_t group_size_ = 0;
  Int4Activations activations_ = Int4Activations::kExact;
  // Exact activations: the packed words, scales and zero points; the others: the VNNI layout alone.
  kernels::cpu::HugePageVector<int32_t> packed_;
  kernels::cpu::HugePageVector<float> scales_;
  kernels::cpu::HugePageVector<int8_t> zero_points_;  // empty: symmetric
  std::optional<kernels::cpu::VnniMatrix> vnni_;
  std::vector<int32_t> input_order_;  // kernel column j reads x column input_order_[j]; empty: j
};

}  // namespace specd::quant
