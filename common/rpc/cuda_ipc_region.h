#pragma once
// Device memory shared between processes on one node with CUDA IPC: the owner exports an
// allocation and an interprocess event (v1::CudaIpcRegion); a consumer maps the allocation and
// orders its reads after the owner's writes by waiting on the event. The GPU counterpart of
// SharedMemoryRegion; built only where CUDA is found (target specd_rpc_cuda).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "specd/v1/types.pb.h"

namespace specd::rpc {

// Owner side: a cudaMalloc allocation on one device, exported with cudaIpcGetMemHandle, and an
// event (cudaEventInterprocess | cudaEventDisableTiming) recorded after every write. Move-only;
// the destructor destroys the event and frees the memory, so every consumer must have closed its
// mapping (or stopped reading) by then.
class CudaIpcBuffer {
 public:
  // size_bytes > 0 on CUDA device ordinal `device` of this process.
  static absl::StatusOr<CudaIpcBuffer> Create(uint64_t size_bytes, int device);

  CudaIpcBuffer(CudaIpcBuffer&& other) noexcept;
  CudaIpcBuffer& operator=(CudaIpcBuffer&& other) noexcept;
  CudaIpcBuffer(const CudaIpcBuffer&) = delete;
  CudaIpcBuffer& operator=(const CudaIpcBuffer&) = delete;
  ~CudaIpcBuffer();

  // Records the interprocess event on `stream` (a stream of this buffer's device) after the
  // writes enqueued on it, so consumers that wait on the event read them.
  absl::Status RecordWrite(cudaStream_t stream);

  void* data() { return data_; }
  uint64_t size() const { return region_.size_bytes(); }
  int device() const { return region_.device_index(); }
  // memory_handle, event_handle, device_index, device_uuid ("GPU-…"), size_bytes.
  const v1::CudaIpcRegion& region() const { return region_; }

 private:
  CudaIpcBuffer(void* data, cudaEvent_t event, v1::CudaIpcRegion region);
  void Reset();

  void* data_ = nullptr;
  cudaEvent_t event_ = nullptr;
  v1::CudaIpcRegion region_;
};

// The region of memory this process already holds and will not change (weights): the
// allocation at `base` (as cudaMalloc returned it, `size_bytes` long) on CUDA device ordinal
// `device`, with no event. The allocation must outlive every consumer's mapping.
absl::StatusOr<v1::CudaIpcRegion> ExportAllocation(void* base, uint64_t size_bytes, int device);

// Consumer side: another process's CudaIpcBuffer (or ExportAllocation) mapped into this one.
// Move-only; the destructor closes the mapping and the event.
class CudaIpcMapping {
 public:
  // Finds the device by device_uuid (device_index is only a hint: ordinals depend on each
  // process's CUDA_VISIBLE_DEVICES) and opens the memory (cudaIpcMemLazyEnablePeerAccess) and,
  // when event_handle is set, the event. A region this same process exports (services in one
  // process) is its CudaIpcBuffer's own memory and event: CUDA refuses to open a process's own
  // handles. INVALID_ARGUMENT for a handle that is not 64 bytes or an empty uuid; NOT_FOUND when
  // no visible device has the uuid; INTERNAL when CUDA refuses.
  static absl::StatusOr<CudaIpcMapping> Open(const v1::CudaIpcRegion& region);

  CudaIpcMapping(CudaIpcMapping&& other) noexcept;
  CudaIpcMapping& operator=(CudaIpcMapping&& other) noexcept;
  CudaIpcMapping(const CudaIpcMapping&) = delete;
  CudaIpcMapping& operator=(const CudaIpcMapping&) = delete;
  ~CudaIpcMapping();

  // Makes `stream` (a stream of device()) wait for the owner's last RecordWrite; no-op for a
  // region without an event (memory that never changes).
  absl::Status WaitForWrites(cudaStream_t stream);

  const void* data() const { return data_; }
  uint64_t size() const { return size_; }
  // This process's ordinal of the device that holds the memory.
  int device() const { return device_; }

 private:
  CudaIpcMapping(void* data, cudaEvent_t event, uint64_t size, int device, bool opened);
  void Reset();

  void* data_ = nullptr;
  cudaEvent_t event_ = nullptr;
  uint64_t size_ = 0;
  int device_ = -1;
  bool opened_ = false;  // false: this process's own buffer, which the mapping must not close
};

}  // namespace specd::rpc
