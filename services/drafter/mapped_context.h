#pragma once
// A drafter session's view of the verifier's context buffer: POSIX shared memory read in place on
// the CPU, or, from a verifier on a GPU, CUDA IPC device memory read in place on that GPU after
// the verifier's writes. Which one follows each handle's memory.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "specd/v1/types.pb.h"

namespace specd::drafter {

class MappedContext {
 public:
  virtual ~MappedContext() = default;

  // The memory it maps (TensorHandle's oneof case).
  virtual v1::TensorHandle::MemoryCase memory() const = 0;
  // Checks `handle` and maps its buffer if it is not the one mapped (rpc::ContextBufferReader's
  // and rpc::DeviceContextReader's rules); reads that follow come after the writes it names.
  virtual absl::Status Accept(const v1::TensorHandle& handle) = 0;
  // The accepted buffer's rows (the owner session's maximum length).
  virtual int64_t rows() const = 0;
  // Positions [begin, end) of the accepted buffer as a tensor over the mapping, no copy: float32
  // on the CPU, or the rows' dtype on their device.
  virtual at::Tensor Rows(int64_t begin, int64_t end) const = 0;
};

// The memory kinds this build maps: POSIX shared memory, and CUDA IPC where built with CUDA.
std::vector<v1::MemoryKind> MappableMemoryKinds();

// A mapping of `handle`'s memory for rows of `width`, not yet accepted. INVALID_ARGUMENT for a
// handle that fails rpc::CheckContextHandle, FAILED_PRECONDITION for device memory in a build
// without CUDA.
absl::StatusOr<std::unique_ptr<MappedContext>> NewMappedContext(const v1::TensorHandle& handle,
                                                                int64_t width);

}  // namespace specd::drafter
