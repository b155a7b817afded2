#include "services/drafter/device_mapped_context.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>

#include "common/rpc/device_context_buffer.h"

namespace specd::drafter {
namespace {

class DeviceMappedContext final : public MappedContext {
 public:
  explicit DeviceMappedContext(int64_t width) : reader_(width) {}

  v1::TensorHandle::MemoryCase memory() const override { return v1::TensorHandle::kCudaIpc; }

  // The drafter's forwards run on the device's current stream, which waits here for the
  // verifier's copy of the rows this handle names.
  absl::Status Accept(const v1::TensorHandle& handle) override {
    if (absl::Status accepted = reader_.Accept(handle); !accepted.ok()) return accepted;
    const auto device = static_cast<c10::DeviceIndex>(reader_.device());
    return reader_.WaitForWrites(c10::cuda::getCurrentCUDAStream(device).stream());
  }

  int64_t rows() const override { return reader_.rows(); }

  at::Tensor Rows(int64_t begin, int64_t end) const override {
    const auto options =
        at::TensorOptions()
            .dtype(reader_.dtype() == v1::DTYPE_BFLOAT16 ? at::kBFloat16 : at::kFloat)
            .device(c10::kCUDA, static_cast<c10::DeviceIndex>(reader_.device()));
    return at::from_blob(const_cast<void*>(reader_.Row(begin)), {end - begin, reader_.width()},
                         options);
  }

 private:
  rpc::DeviceContextReader reader_;
};

}  // namespace

std::unique_ptr<MappedContext> NewDeviceMappedContext(int64_t width) {
  return std::make_unique<DeviceMappedContext>(width);
}

}  // namespace specd::drafter
