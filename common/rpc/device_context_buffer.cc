#include "common/rpc/device_context_buffer.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace specd::rpc {
absl::StatusOr<DeviceContextBuffer> DeviceContextBuffer::Create(std::string owner_instance_id,
                                                                uint64_t buffer_id, int64_t rows,
                                                                int64_t width, v1::Dtype dtype,
                                                                int device) {
  if (dtype != v1::DTYPE_FLOAT32 && dtype != v1::DTYPE_BFLOAT16) {
    return absl::InvalidArgumentError(
        absl::StrCat("device context rows are float32 or bf16, not ", v1::Dtype_Name(dtype)));
  }
  absl::StatusOr<uint64_t> bytes = ContextBufferBytes(rows, width, ContextElementBytes(dtype));
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<CudaIpcBuffer> memory = CudaIpcBuffer::Create(*bytes, device);
  if (!memory.ok()) return memory.status();
  return DeviceContextBuffer(*std::move(memory), std::move(owner_instance_id), buffer_id, rows,
                             width, dtype);
}

DeviceContextBuffer::DeviceContextBuffer(CudaIpcBuffer memory, std::string owner_instance_id,
                                         uint64_t buffer_id, int64_t rows, int64_t width,
                                         v1::Dtype dtype)
    : memory_(std::move(memory)),
      owner_instance_id_(std::move(owner_instance_id)),
      buffer_id_(buffer_id),
      rows_(rows),
      width_(width),
      dtype_(dtype) {}

absl::Status DeviceContextBuffer::WriteRows(int64_t begin, const void* data, int64_t count,
                                            cudaStream_t stream) {
  if (absl::Status fits = CheckRowsToWrite(begin, count, rows_, data); !fits.ok()) return fits;
  if (count == 0) return absl::OkStatus();
  const int64_t row_bytes = width_ * ContextElementBytes(dtype_);
  if (const cudaError_t copied =
          cudaMemcpyAsync(static_cast<char*>(memory_.data()) + begin * row_bytes, data,
                          static_cast<size_t>(count * row_bytes), cudaMemcpyDeviceToDevice, stream);
      copied != cudaSuccess) {
    cudaGetLastError();
    return absl::InternalError(
        absl::StrCat("copying context rows on the device: ", cudaGetErrorString(copied)));
  }
  return memory_.RecordWrite(stream);
}

v1::TensorHandle DeviceContextBuffer::Publish(int64_t begin, int64_t end) {
  v1::TensorHandle handle = ContextHandle(owner_instance_id_, buffer_id_, dtype_, rows_, width_,
                                          begin, end, ++generation_);
  *handle.mutable_cuda_ipc() = memory_.region();
  return handle;
}

DeviceContextReader::DeviceContextReader(int64_t expected_width) : width_(expected_width) {}

absl::Status DeviceContextReader::Accept(const v1::TensorHandle& handle) {
  if (handle.memory_case() != v1::TensorHandle::kCudaIpc) {
    return absl::InvalidArgumentError(
        absl::StrCat("context handle (owner ", handle.owner_instance_id(), ", buffer ",
                     handle.buffer_id(), ") is not in CUDA IPC memory"));
  }
  absl::StatusOr<ContextLayout> layout = CheckContextHandle(handle, width_);
  if (!layout.ok()) return layout.status();
  absl::StatusOr<bool> mapped = accepted_.IsMapped(handle, *layout);
  if (!mapped.ok()) return mapped.status();
  if (!*mapped) {
    absl::StatusOr<CudaIpcMapping> mapping = CudaIpcMapping::Open(handle.cuda_ipc());
    if (!mapping.ok()) return mapping.status();
    mapping_ = *std::move(mapping);
    dtype_ = handle.dtype();
    element_bytes_ = layout->element_bytes;
  }
  accepted_.Record(handle, *layout);
  return absl::OkStatus();
}

absl::Status DeviceContextReader::WaitForWrites(cudaStream_t stream) {
  if (!mapping_.has_value()) return absl::FailedPreconditionError("no context buffer is mapped");
  return mapping_->WaitForWrites(stream);
}

const void* DeviceContextReader::Row(int64_t position) const {
  if (!mapping_.has_value() || position < 0 || position >= rows()) return nullptr;
  return static_cast<const char*>(mapping_->data()) + accepted_.byte_offset() +
         position * width_ * element_bytes_;
}

}  // namespace specd::rpc
