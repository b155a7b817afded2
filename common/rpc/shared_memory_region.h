#pragma once
// POSIX shared-memory objects ("/specd.<pid>.<n>") that hold tensors one process owns and others
// map read-only, and the reaper process that unlinks them when their owner dies, however it dies.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace specd::rpc {

// A POSIX shared-memory object mapped into this process. Move-only; the destructor unmaps, and
// the owner (Create) also shm_unlinks, so readers that mapped it keep their mapping but nobody new
// can open it.
class SharedMemoryRegion {
 public:
  // Owner: a new object named "/specd.<pid>.<counter>" (O_CREAT|O_EXCL, mode 0600), ftruncated to
  // size_bytes (> 0), mapped read-write and zero-filled by the kernel.
  static absl::StatusOr<SharedMemoryRegion> Create(uint64_t size_bytes);
  // Consumer: opens an existing object read-only and maps its first size_bytes (> 0). NOT_FOUND
  // when no object has that name; INVALID_ARGUMENT when it is smaller than size_bytes.
  static absl::StatusOr<SharedMemoryRegion> OpenReadOnly(const std::string& name,
                                                         uint64_t size_bytes);

  SharedMemoryRegion(SharedMemoryRegion&& other) noexcept;
  SharedMemoryRegion& operator=(SharedMemoryRegion&& other) noexcept;
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;
  ~SharedMemoryRegion();

  // The shm_open name, with its leading slash.
  const std::string& name() const { return name_; }
  uint64_t size() const { return size_; }
  // True for the region Create made (read-write, unlinked by the destructor).
  bool owner() const { return owner_; }
  // Start of the mapping. Only the owner's mapping is writable: a consumer writing through it
  // gets SIGSEGV.
  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }

 private:
  SharedMemoryRegion(std::string name, std::byte* data, uint64_t size, bool owner);
  // Unmaps (and for the owner unlinks); leaves the object empty.
  void Reset();

  std::string name_;
  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  bool owner_ = false;
};

// Starts, once per process (later calls in the same process are no-ops; a fork()ed child that
// calls it gets its own), a reaper process: it waits for this process to exit — kill -9 included:
// it blocks in read() on a pipe whose write end only this process holds (close-on-exec) until EOF
// — then unlinks every /dev/shm entry named "specd.<this pid>.*" and exits. Call it early in
// main, before threads start. The reaper ignores SIGINT, SIGTERM, SIGHUP and SIGQUIT and runs in
// its own session, so Ctrl-C or a signal to the process group still leaves it to clean up; it is
// not this process's child (double fork), so it never shows up in this process's wait() calls.
absl::Status StartSharedMemoryReaper();

}  // namespace specd::rpc
