#include "kernels/cpu/parallel_copy.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

namespace specd::kernels::cpu {

void ParallelCopy(std::byte* dst, const std::byte* src, std::size_t bytes, int threads) {
  constexpr std::size_t kCacheLine = 64;
  if (bytes == 0) return;  // memcpy wants valid pointers even for zero bytes
  if (threads <= 1 || bytes < kCacheLine * static_cast<std::size_t>(threads)) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const auto ceil_div = [](std::size_t a, std::size_t b) { return (a + b - 1) / b; };
  const std::size_t slice = ceil_div(ceil_div(bytes, threads), kCacheLine) * kCacheLine;
  std::vector<std::jthread> workers;
  workers.reserve(threads - 1);
  for (int t = 1; t < threads; ++t) {
    const std::size_t begin = std::min(bytes, slice * t);
    const std::size_t end = std::min(bytes, begin + slice);
    workers.emplace_back([=] { std::memcpy(dst + begin, src + begin, end - begin); });
  }
  std::memcpy(dst, src, std::min(bytes, slice));
}

}  // namespace specd::kernels::cpu
