#include "kernels/cpu/vnni_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/dense_gemm_internal.h"
#include "kernels/cpu/vnni_gemm_internal.h"

namespace specd::kernels::cpu {
namespace {

using internal::QuantizedRows;

#define SPECD_F16C __attribute__((target("f16c")))

// float ↔ IEEE half, rounding to nearest even.
SPECD_F16C uint16_t ToHalf(float value) { return _cvtss_sh(value, _MM_FROUND_TO_NEAREST_INT); }
SPECD_F16C float FromHalf(uint16_t half) { return _cvtsh_ss(half); }

// x rounded per row, the rows split over the pool.
void Quantize(const float* x, int64_t rows, const VnniMatrix& w, QuantizedRows& out,
              ThreadPool& pool) {
  const int64_t block = w.activation_block();
  out.q.resize(rows * w.cols);
  out.scales.resize(rows * w.cols / block);
  out.sums.resize(rows * w.cols / w.group_size);
  pool.ParallelFor(rows, 1, [&](int64_t begin, int64_t end) {
    internal::QuantizeRowsAvx2(x, w.cols, w.group_size, block, begin, end, out);
  });
}

}  // namespace

int64_t VnniActivationBlock(int64_t group_size) {
  int64_t block = kVnniMaxActivationBlock;
  while (group_size % block != 0) block /= 2;
  return block;
}

int64_t VnniMatrix::activation_block() const { return VnniActivationBlock(group_size); }

VnniGemmIsa BestVnniGemmIsa() {
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma")) {
    return VnniGemmIsa::kAvx512Vnni;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return VnniGemmIsa::kAvx2;
  return VnniGemmIsa::kNone;
}

VnniMatrix RepackInt4ForVnni(const Int4Matrix& w) {
  VnniMatrix out;
  out.rows = w.rows;
  out.cols = w.cols;
  out.group_size = w.group_size;
  const int64_t blocks = (w.rows + kVnniRowBlock - 1) / kVnniRowBlock;
  const int64_t chunks = w.cols / 8;
  const int64_t groups = w.cols / w.group_size;
  out.codes.assign(blocks * chunks * 64, 0);
  out.scales.assign(blocks * groups * kVnniRowBlock, 0);
  if (w.zero_points != nullptr) out.zero_codes.assign(blocks * groups * kVnniRowBlock, 8);
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t r = 0; r < kVnniRowBlock; ++r) {
      const int64_t n = b * kVnniRowBlock + r;
      if (n >= w.rows) continue;  // padding rows stay zero
      for (int64_t chunk = 0; chunk < chunks; ++chunk) {
        // A packed word holds columns 8·chunk + i at bits 4i; byte c takes columns c and 4 + c.
        const auto word = static_cast<uint32_t>(w.packed[n * chunks + chunk]);
        for (int64_t c = 0; c < 4; ++c) {
          out.codes[(b * chunks + chunk) * 64 + 4 * r + c] =
              static_cast<uint8_t>(((word >> (4 * c)) & 0xf) | ((word >> (4 * c + 16)) & 0xf) << 4);
        }
      }
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t at = (b * groups + g) * kVnniRowBlock + r;
        out.scales[at] = ToHalf(w.scales[n * groups + g]);
        if (w.zero_points != nullptr) out.zero_codes[at] = 8 + w.zero_points[n * groups + g];
      }
    }
  }
  return out;
}

VnniMatrix QuantizeRowsForVnni(const DenseMatrix& w, ThreadPool& pool) {
  VnniMatrix out;
  out.bits = 8;
  out.rows = w.rows;
  out.cols = w.cols;
  out.group_size = w.cols;
  const int64_t blocks = (w.rows + kVnniRowBlock - 1) / kVnniRowBlock;
  out.codes.assign(blocks * w.cols * kVnniRowBlock, 0);
  out.scales.assign(blocks * kVnniRowBlock, 0);
  const int64_t row_bytes = w.cols * (w.bf16 ? 2 : 4);
  const auto element = [&](int64_t n, int64_t k) {
    const void* row = static_cast<const char*>(w.data) + n * row_bytes;
    return w.bf16 ? internal::WeightAt<true>(row, k) : internal::WeightAt<false>(row, k);
  };
  pool.ParallelFor(blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin * kVnniRowBlock; n < std::min(end * kVnniRowBlock, w.rows); ++n) {
      const int64_t b = n / kVnniRowBlock, r = n % kVnniRowBlock;
      float amax = 0;
      for (int64_t k = 0; k < w.cols; ++k) amax = std::max(amax, std::fabs(element(n, k)));
      const uint16_t half_scale = ToHalf(amax / 127.0f);
      const float scale = FromHalf(half_scale);
      const float inverse = scale == 0 ? 0.0f : 1.0f / scale;
      uint8_t* block = out.codes.data() + b * w.cols * kVnniRowBlock;
      for (int64_t k = 0; k < w.cols; ++k) {
        const float q = std::clamp(std::nearbyint(element(n, k) * inverse), -127.0f, 127.0f);
        block[(k / 4) * 64 + 4 * r + k % 4] = static_cast<uint8_t>(static_cast<int>(q) + 128);
      }
      out.scales[b * kVnniRowBlock + r] = half_scale;
    }
  });
  return out;
}

std::vector<float> Dequantize(const VnniMatrix& w) {
  const int64_t groups = w.cols / w.group_size;
  const int64_t block_bytes = w.cols * w.bits / 32 * 64;
  std::vector<float> dense(w.rows * w.cols);
  for (int64_t n = 0; n < w.rows; ++n) {
    const int64_t block = n / kVnniRowBlock, r = n % kVnniRowBlock;
    for (int64_t k = 0; k < w.cols; ++k) {
      const uint8_t byte = w.codes[block * block_bytes + (k * w.bits / 32) * 64 + 4 * r + k % 4];
      const int code = w.bits == 8 ? byte : k % 8 < 4 ? byte & 0xf : byte >> 4;
      const int64_t at = (block * groups + k / w.group_size) * kVnniRowBlock + r;
      const int zero = w.zero_codes.empty() ? w.midpoint() : w.zero_codes[at];
      dense[n * w.cols + k] = static_cast<float>(code - zero) * FromHalf(w.scales[at]);
    }
  }
  return dense;
}

void VnniGemm(const float* x, int64_t rows, const VnniMatrix& w, float* y, ThreadPool& pool,
              VnniGemmIsa isa) {
  thread_local QuantizedRows quantized;
  Quantize(x, rows, w, quantized, pool);
  const QuantizedRows& xq = quantized;
  const int64_t blocks = (w.rows + kVnniRowBlock - 1) / kVnniRowBlock;
  const bool wide = w.bits == 8;
  const auto body =
      isa == VnniGemmIsa::kAvx512Vnni
          ? (wide ? &internal::VnniRowBlocksAvx512<8> : &internal::VnniRowBlocksAvx512<4>)
          : (wide ? &internal::VnniRowBlocksAvx2<8> : &internal::VnniRowBlocksAvx2<4>);
  pool.ParallelFor(blocks, 4,
                   [&](int64_t begin, int64_t end) { body(xq, rows, w, begin, end, y); });
}

}  // namespace specd::kernels::cpu
