#include "services/verifier/context_rows.h"

#include <ATen/ATen.h>

#include <utility>

#include "common/rpc/context_buffer.h"
#ifdef SPECD_CUDA_CONTEXT
#include "services/verifier/device_context_rows.h"
#endif

namespace specd::verifier {
namespace {

class HostContextRows final : public ContextRows {
 public:
  explicit HostContextRows(rpc::ContextBuffer buffer) : buffer_(std::move(buffer)) {}

  absl::StatusOr<v1::TensorHandle> Publish(int64_t begin, const at::Tensor& rows) override {
    const at::Tensor host = rows.to(at::kCPU, at::kFloat).contiguous();
    if (absl::Status written = buffer_.WriteRows(begin, host.data_ptr<float>(), host.size(0));
        !written.ok()) {
      return written;
    }
    return buffer_.Publish(begin, begin + host.size(0));
  }

 private:
  rpc::ContextBuffer buffer_;
};

}  // namespace

v1::MemoryKind ContextMemoryKind(const model::ModelOptions& model) {
  return model.device.is_cuda() ? v1::MEMORY_KIND_CUDA_IPC : v1::MEMORY_KIND_POSIX_SHM;
}

v1::Dtype ContextDtype(const model::ModelOptions& model) {
  return model.device.is_cuda() && model.dtype == at::kBFloat16 ? v1::DTYPE_BFLOAT16
                                                                : v1::DTYPE_FLOAT32;
}

absl::StatusOr<std::unique_ptr<ContextRows>> OpenContextRows(std::string owner_instance_id,
                                                             uint64_t buffer_id, int64_t rows,
                                                             int64_t width,
                                                             const model::ModelOptions& model) {
  if (ContextMemoryKind(model) == v1::MEMORY_KIND_CUDA_IPC) {
#ifdef SPECD_CUDA_CONTEXT
    return OpenDeviceContextRows(std::move(owner_instance_id), buffer_id, rows, width, model);
#else
    return absl::FailedPreconditionError(
        "this verifier was built without CUDA: it has no context buffers in device memory");
#endif
  }
  absl::StatusOr<rpc::ContextBuffer> buffer =
      rpc::ContextBuffer::Create(std::move(owner_instance_id), buffer_id, rows, width);
  if (!buffer.ok()) return buffer.status();
  return std::make_unique<HostContextRows>(*std::move(buffer));
}

}  // namespace specd::verifier
