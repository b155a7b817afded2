#pragma once
// Host memory copy split over threads: the streaming floor that CPU benchmarks quote their
// effective weight bandwidth against (a GEMV cannot read weights faster than this copies them).
#include <cstddef>

namespace specd::kernels::cpu {

// Copies `bytes` from `src` to `dst` (non-overlapping), each of `threads` threads taking one
// contiguous slice aligned to 64 bytes. threads <= 1 copies on the calling thread.
void ParallelCopy(std::byte* dst, const std::byte* src, std::size_t bytes, int threads);

}  // namespace specd::kernels::cpu
