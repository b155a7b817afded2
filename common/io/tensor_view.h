#pragma once
// A named tensor whose bytes live elsewhere: in a mapped checkpoint file, or in a caller's buffer
// that is about to be written out.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/io/dtype.h"

namespace specd::io {

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  // Row-major, little-endian elements; exactly TensorByteSize(dtype, shape) bytes.
  std::span<const std::byte> bytes;
  // Keeps `bytes` valid (the file mapping) for as long as any copy of this view lives; null when
  // the bytes belong to the caller.
  std::shared_ptr<const void> owner;

  int64_t NumElements() const;
};

// Bytes a tensor of this dtype and shape occupies, or nullopt if a dimension is negative or the
// size does not fit in 64 bits.
std::optional<uint64_t> TensorByteSize(DType dtype, std::span<const int64_t> shape);

}  // namespace specd::io
