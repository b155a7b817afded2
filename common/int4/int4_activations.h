#pragma once
// How the CPU's INT4 kernel takes a projection's activations. kExact (W4A16, the default and the
// reference): float32, each weight dequantized in registers. kInt8 (W4A8): rounded per row and
// block of up to 128 columns to int8 and multiplied with integer dot products (AVX-512 VNNI, or
// AVX2), faster at one row and several times faster on verify blocks, batches and prefill, at an
// error the tests state (kernels/cpu/vnni_gemm.h).
namespace specd::quant {

enum class Int4Activations { kExact, kInt8 };

}  // namespace specd::quant
