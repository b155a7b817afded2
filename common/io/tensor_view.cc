#include "common/io/tensor_view.h"

namespace specd::io {

int64_t TensorView::NumElements() const {
  int64_t count = 1;
  for (int64_t dim : shape) count *= dim;
  return count;
}

std::optional<uint64_t> TensorByteSize(DType dtype, std::span<const int64_t> shape) {
  uint64_t bytes = DTypeSize(dtype);
  for (int64_t dim : shape) {
    if (dim < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes)) {
      return std::nullopt;
    }
  }
  return bytes;
}

}  // namespace specd::io
