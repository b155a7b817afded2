#include "common/io/dtype.h"

namespace specd::io {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kBool:
    case DType::kU8:
    case DType::kI8:
      return 1;
    case DType::kI16:
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kI32:
    case DType::kF32:
      return 4;
    case DType::kI64:
    case DType::kF64:
      return 8;
  }
  return 0;  // unreachable: the switch covers every enumerator
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return "BOOL";
    case DType::kU8:
      return "U8";
    case DType::kI8:
      return "I8";
    case DType::kI16:
      return "I16";
    case DType::kI32:
      return "I32";
    case DType::kI64:
      return "I64";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kF32:
      return "F32";
    case DType::kF64:
      return "F64";
  }
  return "?";  // unreachable: the switch covers every enumerator
}

std::optional<DType> DTypeFromName(std::string_view name) {
  for (DType dtype : kAllDTypes) {
    if (DTypeName(dtype) == name) return dtype;
  }
  return std::nullopt;
}

}  // namespace specd::io
