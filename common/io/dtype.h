#pragma once
// Element types a safetensors file can hold, spelled as the format spells them ("BF16", "I32").
#include <cstddef>
#include <optional>
#include <string_view>

namespace specd::io {

enum class DType { kBool, kU8, kI8, kI16, kI32, kI64, kF16, kBF16, kF32, kF64 };

// Every dtype, in declaration order; tests and summaries iterate over it.
inline constexpr DType kAllDTypes[] = {DType::kBool, DType::kU8,  DType::kI8,  DType::kI16,
                                       DType::kI32,  DType::kI64, DType::kF16, DType::kBF16,
                                       DType::kF32,  DType::kF64};

// Bytes per element.
size_t DTypeSize(DType dtype);

// The safetensors spelling: "BOOL", "U8", ..., "BF16", "F32".
const char* DTypeName(DType dtype);

// The dtype a safetensors header names, or nullopt for a name this project does not read.
std::optional<DType> DTypeFromName(std::string_view name);

}  // namespace specd::io
