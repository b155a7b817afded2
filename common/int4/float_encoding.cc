#include "common/int4/float_encoding.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace specd::quant {
namespace {

uint16_t FloatToBf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);  // stay a NaN
  const uint32_t round_to_even = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + round_to_even) >> 16);
}

float Bf16ToFloat(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

float F16ToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1F;
  const uint32_t mantissa = bits & 0x3FF;
  if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F800000 | (mantissa << 13));
  if (exponent == 0) {  // zero or subnormal: mantissa · 2^-24
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t FloatToF16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const float magnitude = std::fabs(value);
  if (std::isnan(value)) return sign | 0x7E00;
  if (magnitude >= 65520.0f) return sign | 0x7C00;  // rounds past the largest f16: infinity
  if (magnitude < 6.103515625e-05f) {               // below the smallest normal: steps of 2^-24
    return sign | static_cast<uint16_t>(std::nearbyint(magnitude * 16777216.0f));
  }
  const uint32_t magnitude_bits = std::bit_cast<uint32_t>(magnitude);
  const uint32_t round_to_even = 0xFFF + ((magnitude_bits >> 13) & 1);
  return sign | static_cast<uint16_t>((magnitude_bits + round_to_even - (112u << 23)) >> 13);
}

}  // namespace

bool IsScaleDType(io::DType dtype) {
  return dtype == io::DType::kF32 || dtype == io::DType::kBF16 || dtype == io::DType::kF16;
}

float RoundToDType(float value, io::DType dtype) {
  switch (dtype) {
    case io::DType::kBF16:
      return Bf16ToFloat(FloatToBf16(value));
    case io::DType::kF16:
      return F16ToFloat(FloatToF16(value));
    default:
      return value;
  }
}

absl::StatusOr<std::vector<float>> DecodeFloats(const io::TensorView& tensor) {
  if (!IsScaleDType(tensor.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(tensor.name, ": dtype ",
                                                   io::DTypeName(tensor.dtype),
                                                   " is not a float format (F32, BF16, F16)"));
  }
  std::vector<float> values(tensor.NumElements());
  if (tensor.dtype == io::DType::kF32) {
    std::memcpy(values.data(), tensor.bytes.data(), values.size() * sizeof(float));
    return values;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    uint16_t bits;
    std::memcpy(&bits, tensor.bytes.data() + 2 * i, sizeof(bits));
    values[i] = tensor.dtype == io::DType::kBF16 ? Bf16ToFloat(bits) : F16ToFloat(bits);
  }
  return values;
}

std::vector<std::byte> EncodeFloats(std::span<const float> values, io::DType dtype) {
  std::vector<std::byte> bytes(values.size() * io::DTypeSize(dtype));
  if (dtype == io::DType::kF32) {
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t bits =
        dtype == io::DType::kBF16 ? FloatToBf16(values[i]) : FloatToF16(values[i]);
    std::memcpy(bytes.data() + 2 * i, &bits, sizeof(bits));
  }
  return bytes;
}

}  // namespace specd::quant
