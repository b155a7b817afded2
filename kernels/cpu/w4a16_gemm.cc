#include "kernels/cpu/w4a16_gemm.h"

#include "kernels/cpu/w4a16_gemm_internal.h"

namespace specd::kernels::cpu {

Int4GemmIsa BestInt4GemmIsa() {
  if (!__builtin_cpu_supports("fma")) return Int4GemmIsa::kScalar;
  if (__builtin_cpu_supports("avx512f")) return Int4GemmIsa::kAvx512;
  if (__builtin_cpu_supports("avx2")) return Int4GemmIsa::kAvx2Fma;
  return Int4GemmIsa::kScalar;
}

namespace {

using Body = void (*)(const float*, int64_t, const Int4Matrix&, int64_t, int64_t, float*);

Body BodyFor(Int4GemmIsa isa, const Int4Matrix& w) {
  switch (isa) {
    case Int4GemmIsa::kAvx512:
      if (w.cols % 16 == 0 && w.group_size % 16 == 0) return internal::W4A16GemmAvx512;
      return internal::W4A16GemmAvx2;
    case Int4GemmIsa::kAvx2Fma:
      return internal::W4A16GemmAvx2;
    case Int4GemmIsa::kScalar:
      break;
  }
  return internal::W4A16GemmScalar;
}

}  // namespace

void W4A16Gemm(const float* x, int64_t rows, const Int4Matrix& w, float* y, ThreadPool& pool,
               Int4GemmIsa isa) {
  const auto body = BodyFor(isa, w);
  // Runs of output columns a multiple of the kernels' widest tile (8) long.
  pool.ParallelFor(w.rows, 8, [&](int64_t begin, int64_t end) { body(x, rows, w, begin, end, y); });
}

}  // namespace specd::kernels::cpu
