#pragma once
// The kernels/cpu backend of the op table (cpu_backend.cc), and the threads its kernels run on.
#include "common/model/ops/op_table.h"

namespace specd::model::ops {

// Dense GEMV for a decode step, the W4A16 GEMM, and the token-by-token gated delta rule.
const Backend& CpuBackend();

// Gives the CPU kernels' pool `threads` threads (0: one per CPU the process may use, its cgroup
// quota included: kernels::cpu::AvailableCpus) and LibTorch's intra-op parallelism one:
// LibTorch's OpenMP threads call into OpenBLAS, which runs a pool of its own, and the two pools
// on the same cores made prefill 2.7x and decode 3.5x slower than this (measured on 2 cores).
// Call before any model runs; false, changing nothing, once the pool has started.
bool ConfigureCpuThreads(int threads);

}  // namespace specd::model::ops
