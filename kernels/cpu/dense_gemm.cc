#include "kernels/cpu/dense_gemm.h"

#include <cstring>

#include "kernels/cpu/dense_gemm_internal.h"

namespace specd::kernels::cpu {
namespace internal {
namespace {

// Eight lanes: one AVX register, or two SSE ones (wider vectors than the target's registers go
// through the stack).
typedef float Lanes __attribute__((vector_size(32)));
typedef uint32_t Words __attribute__((vector_size(32)));
typedef uint16_t Halves __attribute__((vector_size(16)));
constexpr int kLanes = 8;

// Inlined into the cloned body below, so compiled for each of its targets (and no vector crosses
// a call, whose ABI would differ between them).
#define SPECD_INLINE __attribute__((always_inline)) inline

template <bool kBf16>
struct GenericBody {
  const float* x;
  const DenseMatrix& w;
  float* y;

  // Eight weights of column k on, as float32.
  SPECD_INLINE static void Load(const char* row, int64_t k, Lanes& lanes) {
    if constexpr (kBf16) {
      Halves halves;
      std::memcpy(&halves, row + 2 * k, sizeof halves);
      const Words words = __builtin_convertvector(halves, Words) << 16;
      std::memcpy(&lanes, &words, sizeof lanes);
    } else {
      std::memcpy(&lanes, row + 4 * k, sizeof lanes);
    }
  }

  template <int kM, int kN>
  SPECD_INLINE void Tile(int64_t m0, int64_t n0) {
    const int64_t row_bytes = w.cols * (kBf16 ? 2 : 4);
    const int64_t vector_cols = w.cols / kLanes * kLanes;
    const char* rows[kN];
    for (int j = 0; j < kN; ++j) rows[j] = static_cast<const char*>(w.data) + (n0 + j) * row_bytes;
    Lanes acc[kM][kN] = {};
    for (int64_t k = 0; k < vector_cols; k += kLanes) {
      Lanes weights[kN];
      for (int j = 0; j < kN; ++j) Load(rows[j], k, weights[j]);
      for (int i = 0; i < kM; ++i) {
        Lanes xs;
        std::memcpy(&xs, x + (m0 + i) * w.cols + k, sizeof xs);
        for (int j = 0; j < kN; ++j) acc[i][j] += xs * weights[j];
      }
    }
    for (int i = 0; i < kM; ++i) {
      for (int j = 0; j < kN; ++j) {
        float total = 0;
        for (int lane = 0; lane < kLanes; ++lane) total += acc[i][j][lane];
        for (int64_t k = vector_cols; k < w.cols; ++k) {
          total += x[(m0 + i) * w.cols + k] * WeightAt<kBf16>(rows[j], k);
        }
        y[(m0 + i) * w.rows + n0 + j] = total;
      }
    }
  }
};

}  // namespace

// Compiled for AVX2 + FMA and for the x86-64 baseline; the loader picks one by the CPU's features.
__attribute__((target_clones("arch=x86-64-v3", "default"))) void DenseGemmGeneric(
    const float* x, int64_t m, const DenseMatrix& w, int64_t n_begin, int64_t n_end, float* y) {
  if (w.bf16) {
    GenericBody<true> body{x, w, y};
    ForEachTile(m, n_begin, n_end, body);
  } else {
    GenericBody<false> body{x, w, y};
    ForEachTile(m, n_begin, n_end, body);
  }
}

}  // namespace internal

void DenseGemm(const float* x, int64_t m, const DenseMatrix& w, float* y, ThreadPool& pool) {
  const auto body =
      __builtin_cpu_supports("avx512f") ? internal::DenseGemmAvx512 : internal::DenseGemmGeneric;
  pool.ParallelFor(w.rows, internal::kDenseTile,
                   [&](int64_t begin, int64_t end) { body(x, m, w, begin, end, y); });
}

}  // namespace specd::kernels::cpu
