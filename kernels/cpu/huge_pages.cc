#include "kernels/cpu/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>

namespace specd::kernels::cpu {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::align_val_t kCacheLine{64};

std::size_t RoundUp(std::size_t bytes, std::size_t to) { return (bytes + to - 1) / to * to; }

}  // namespace

// Large buffers are mapped afresh rather than taken from malloc, whose recycled heap memory may
// already sit on 4 KiB pages: the mapping is over-sized by a huge page and trimmed to a boundary.
void* AllocateHugePageBuffer(std::size_t bytes) {
  if (bytes < kHugePage) return ::operator new(bytes == 0 ? 1 : bytes, kCacheLine);
  const std::size_t size = RoundUp(bytes, kHugePage);
  void* mapped =
      mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(mapped);
  const std::uintptr_t aligned = RoundUp(start, kHugePage);
  if (aligned > start) munmap(mapped, aligned - start);
  if (const std::size_t tail = start + kHugePage - aligned; tail > 0) {
    munmap(reinterpret_cast<void*>(aligned + size), tail);
  }
  // Advice, not a requirement: with THP off the pages stay 4 KiB.
  madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

void FreeHugePageBuffer(void* buffer, std::size_t bytes) {
  if (bytes < kHugePage) {
    ::operator delete(buffer, kCacheLine);
    return;
  }
  munmap(buffer, RoundUp(bytes, kHugePage));
}

}  // namespace specd::kernels::cpu
