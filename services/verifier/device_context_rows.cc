#include "services/verifier/device_context_rows.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rpc/device_context_buffer.h"

namespace specd::verifier {
namespace {

class DeviceContextRows final : public ContextRows {
 public:
  explicit DeviceContextRows(rpc::DeviceContextBuffer buffer) : buffer_(std::move(buffer)) {}

  absl::StatusOr<v1::TensorHandle> Publish(int64_t begin, const at::Tensor& rows) override {
    const c10::Device device(c10::kCUDA, static_cast<c10::DeviceIndex>(buffer_.device()));
    if (rows.device() != device) {
      return absl::InvalidArgumentError(
          absl::StrCat("context rows on ", rows.device().str(), " for a buffer on ", device.str()));
    }
    const at::Tensor data =
        rows.to(buffer_.dtype() == v1::DTYPE_BFLOAT16 ? at::kBFloat16 : at::kFloat).contiguous();
    // The copy follows the forward that computed the rows on the same stream; `data` may be freed
    // once it is enqueued (the caching allocator reuses memory in stream order).
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
    if (absl::Status written = buffer_.WriteRows(begin, data.data_ptr(), data.size(0), stream);
        !written.ok()) {
      return written;
    }
    return buffer_.Publish(begin, begin + data.size(0));
  }

 private:
  rpc::DeviceContextBuffer buffer_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ContextRows>> OpenDeviceContextRows(
    std::string owner_instance_id, uint64_t buffer_id, int64_t rows, int64_t width,
    const model::ModelOptions& model) {
  absl::StatusOr<rpc::DeviceContextBuffer> buffer = rpc::DeviceContextBuffer::Create(
      std::move(owner_instance_id), buffer_id, rows, width, ContextDtype(model),
      model.device.has_index() ? model.device.index() : c10::cuda::current_device());
  if (!buffer.ok()) return buffer.status();
  return std::make_unique<DeviceContextRows>(*std::move(buffer));
}

}  // namespace specd::verifier
