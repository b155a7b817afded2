#pragma once
// Memory for what a decode step streams from DRAM (INT4 and int8 weights): buffers of 2 MiB or
// more start on 2 MiB boundaries and are advised onto transparent huge pages before their first
// touch. A 4 KiB page costs a TLB miss every 4 KiB of a weight read once per token; on this
// project's 2-core EPYC a 2-thread read of 2 GiB ran 23–27 GB/s on 4 KiB pages and 28–34 GB/s on
// huge ones (same process kind, alternating). Where the kernel gives no huge pages (THP off) the
// advice is ignored and the buffer is an ordinary one.
#include <cstddef>
#include <vector>

namespace specd::kernels::cpu {

// `bytes` of uninitialized memory, 64-byte aligned; free with FreeHugePageBuffer, the same
// `bytes`. Throws std::bad_alloc when the system has none to give.
void* AllocateHugePageBuffer(std::size_t bytes);
void FreeHugePageBuffer(void* buffer, std::size_t bytes);

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(AllocateHugePageBuffer(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) { FreeHugePageBuffer(p, n * sizeof(T)); }
  friend bool operator==(const HugePageAllocator&, const HugePageAllocator&) { return true; }
};

template <class T>
using HugePageVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace specd::kernels::cpu
