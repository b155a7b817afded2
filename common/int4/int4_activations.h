#pragma once
// How the CPU's INT4 kernel takes a projection's activations. kExact (W4A16, the default and the
// reference): float32, each weight dequantized in registers. kBf16 (W4A16 as a GPU runs it):
// rounded to bf16 and multiplied with AVX512-BF16 dot products summing in float32, near-exact and
// faster at every row count. kInt8 (W4A8): rounded per row and block of up to 128 columns to int8
// and multiplied with integer dot products (AVX-512 VNNI, or AVX2), the fastest on verify blocks,
// batches and prefill. Both rounding modes have errors the tests state (kernels/cpu/bf16_gemm.h,
// kernels/cpu/vnni_gemm.h).
namespace specd::quant {

enum class Int4Activations { kExact, kBf16, kInt8 };

// The mode's name on the command line: exact, bf16 or int8.
constexpr const char* Int4ActivationsName(Int4Activations activations) {
  switch (activations) {
    case Int4Activations::kExact:
      return "exact";
    case Int4Activations::kBf16:
      return "bf16";
    case Int4Activations::kInt8:
      return "int8";
  }
  return "?";
}

}  // namespace specd::quant
