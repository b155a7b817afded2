#pragma once
// The context buffers of a verifier on a GPU: its sessions' committed rows stay in device memory
// (a CudaIpcBuffer) and a drafter on the same GPU reads them in place, its stream ordered after
// the writes by the buffer's interprocess event. The device counterparts of ContextBuffer and
// ContextBufferReader, with the same handles and checks (context_buffer.h); built only where
// CUDA is found (target specd_rpc_cuda).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/rpc/context_buffer.h"
#include "common/rpc/cuda_ipc_region.h"
#include "specd/v1/types.pb.h"

namespace specd::rpc {

// Owner side: [rows, width] rows of `dtype` (DTYPE_FLOAT32 or DTYPE_BFLOAT16: the model's) on
// CUDA device ordinal `device`; row p holds absolute position p.
class DeviceContextBuffer {
 public:
  static absl::StatusOr<DeviceContextBuffer> Create(std::string owner_instance_id,
                                                    uint64_t buffer_id, int64_t rows, int64_t width,
                                                    v1::Dtype dtype, int device);

  // Enqueues on `stream` (a stream of this buffer's device) the copy of `count` rows from device
  // memory `data` (count × width elements of dtype, row-major) to positions [begin, begin +
  // count), then the interprocess event, which orders a reader after the copy. OUT_OF_RANGE
  // beyond rows, INVALID_ARGUMENT for a negative begin or count.
  absl::Status WriteRows(int64_t begin, const void* data, int64_t count, cudaStream_t stream);
  // As ContextBuffer::Publish, with cuda_ipc memory and this buffer's dtype.
  v1::TensorHandle Publish(int64_t begin, int64_t end);

  uint64_t generation() const { return generation_; }
  int64_t rows() const { return rows_; }
  int64_t width() const { return width_; }
  v1::Dtype dtype() const { return dtype_; }
  int device() const { return memory_.device(); }

 private:
  DeviceContextBuffer(CudaIpcBuffer memory, std::string owner_instance_id, uint64_t buffer_id,
                      int64_t rows, int64_t width, v1::Dtype dtype);

  CudaIpcBuffer memory_;
  std::string owner_instance_id_;
  uint64_t buffer_id_;
  int64_t rows_;
  int64_t width_;
  v1::Dtype dtype_;
  uint64_t generation_ = 0;
};

// Consumer side, one per session: maps the device buffer a handle names (re-mapping only when
// owner_instance_id or buffer_id changes) and checks each handle as ContextBufferReader does.
class DeviceContextReader {
 public:
  explicit DeviceContextReader(int64_t expected_width);

  // CheckContextHandle's and AcceptedContext's checks, then CudaIpcMapping::Open's for a buffer
  // not yet mapped; INVALID_ARGUMENT for a handle that is not cuda_ipc. On any error the reader
  // keeps its previous mapping and generation.
  absl::Status Accept(const v1::TensorHandle& handle);
  // Makes `stream` (a stream of device()) wait for the writes the owner published last.
  absl::Status WaitForWrites(cudaStream_t stream);

  // Device address of absolute `position`'s row after a successful Accept; nullptr when nothing
  // is mapped or position is outside [0, rows).
  const void* Row(int64_t position) const;

  int64_t rows() const { return accepted_.rows(); }
  int64_t width() const { return width_; }
  v1::Dtype dtype() const { return dtype_; }
  // This process's ordinal of the device holding the rows; -1 before the first Accept.
  int device() const { return mapping_.has_value() ? mapping_->device() : -1; }
  uint64_t generation() const { return accepted_.generation(); }

 private:
  int64_t width_;
  std::optional<CudaIpcMapping> mapping_;
  AcceptedContext accepted_;
  v1::Dtype dtype_ = v1::DTYPE_UNSPECIFIED;
  int64_t element_bytes_ = 0;
};

}  // namespace specd::rpc
