#include "common/int4/float_encoding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace specd::quant {
namespace {

uint16_t Bits16(const std::vector<std::byte>& bytes) {
  uint16_t bits;
  std::memcpy(&bits, bytes.data(), sizeof(bits));
  return bits;
}

io::TensorView View(const std::vector<std::byte>& bytes, io::DType dtype, int64_t count) {
  return io::TensorView{
      .name = "t.weight_scale", .dtype = dtype, .shape = {count}, .bytes = bytes, .owner = nullptr};
}

TEST(FloatEncodingTest, EncodesBf16AndF16WithRoundToNearestEven) {
  const float values[] = {0.1f};
  EXPECT_EQ(Bits16(EncodeFloats(values, io::DType::kBF16)), 0x3DCD);
  EXPECT_EQ(Bits16(EncodeFloats(values, io::DType::kF16)), 0x2E66);
  const float f16_edges[] = {65504.0f, 1e6f, 5.9604645e-08f /* 2^-24 */, -2.0f};
  const uint16_t expected[] = {0x7BFF, 0x7C00, 0x0001, 0xC000};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(Bits16(EncodeFloats({&f16_edges[i], 1}, io::DType::kF16)), expected[i])
        << f16_edges[i];
  }
}

TEST(FloatEncodingTest, DecodingWhatWasEncodedGivesTheRoundedValue) {
  const std::vector<float> values = {0.1f, -3.14159f, 1e-6f, 7.5e-3f, 1.0f / 3, 0.0f};
  for (io::DType dtype : {io::DType::kF32, io::DType::kBF16, io::DType::kF16}) {
    const std::vector<std::byte> bytes = EncodeFloats(values, dtype);
    const absl::StatusOr<std::vector<float>> decoded =
        DecodeFloats(View(bytes, dtype, static_cast<int64_t>(values.size())));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ((*decoded)[i], RoundToDType(values[i], dtype))
          << io::DTypeName(dtype) << " " << values[i];
      EXPECT_NEAR((*decoded)[i], values[i], std::abs(values[i]) * 1e-2 + 1e-7);
    }
  }
}

TEST(FloatEncodingTest, RefusesIntegerTensorsNamingThem) {
  const std::vector<std::byte> bytes(4);
  EXPECT_EQ(DecodeFloats(View(bytes, io::DType::kI32, 1)).status().message(),
            "t.weight_scale: dtype I32 is not a float format (F32, BF16, F16)");
}

}  // namespace
}  // namespace specd::quant
