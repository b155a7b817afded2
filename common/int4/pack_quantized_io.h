#pragma once
// Reads and writes one linear layer in compressed-tensors `pack-quantized` form, the tensors
// vLLM and transformers load (research/qwen35.md §5):
//   <linear>.weight_packed      int32 [N, ceil(K/8)]   codes, see PackedInt4Weight
//   <linear>.weight_scale       f32/bf16/f16 [N, K/G]  (G = K: channel-wise, [N, 1])
//   <linear>.weight_zero_point  int32 [ceil(N/8), K/G] asymmetric only; zero + 8 packed along N:
//                               row 8j + i is nibble i of word j, low nibble first
//   <linear>.weight_g_idx       int32 [K]              act-order only: the group of column k
//   <linear>.weight_shape       int64 [2]              [N, K]
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/int4/packed_int4_weight.h"
#include "common/io/checkpoint.h"
#include "common/io/tensor_view.h"

namespace specd::quant {

// The INT4 weight of `linear_name` (e.g. "model.layers.0.mlp.down_proj"), copied out of the
// checkpoint. The group size is K divided by the scale's column count. A missing tensor, a shape
// that disagrees with weight_shape, or a grid ValidateInt4Grid refuses is an error naming the
// tensor.
absl::StatusOr<PackedInt4Weight> LoadPackedInt4Weight(const io::Checkpoint& checkpoint,
                                                      std::string_view linear_name);

// A tensor with the bytes it owns.
struct OwnedTensor {
  std::string name;
  io::DType dtype = io::DType::kF32;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;

  // Valid while this tensor lives and is not modified.
  io::TensorView View() const;
};

// The tensors compressed-tensors writes for `weight` as `linear_name`, in the order above
// (weight_zero_point and weight_g_idx only when the grid has them).
std::vector<OwnedTensor> PackQuantizedTensors(const PackedInt4Weight& weight,
                                              std::string_view linear_name);

}  // namespace specd::quant
