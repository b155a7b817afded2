#pragma once
// Debian 12's LibTorch multiplies float32 matrices (dense drafters, training) with OpenBLAS 0.3.21,
// which picks its kernels by CPU model when it loads and, on a CPU newer than itself (this
// project's Emerald Rapids machines, family 6 model 207), falls back to its SSE3 "Prescott" ones.
// Only OPENBLAS_CORETYPE, read as the library loads, overrides that, so a process that finds the
// fallback on a CPU with AVX2 or AVX-512 runs itself again with the widest kernels named.
namespace specd::cli {

// Returns (doing nothing) unless the BLAS is OpenBLAS on its fallback kernels, OPENBLAS_CORETYPE
// is unset and the CPU has wider ones; otherwise does not return unless the exec fails.
void RunAgainOnWideBlasKernels(char** argv);

}  // namespace specd::cli
