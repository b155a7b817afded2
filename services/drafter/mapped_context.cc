#include "services/drafter/mapped_context.h"

#include <ATen/ATen.h>

#include "common/rpc/context_buffer.h"
#ifdef SPECD_CUDA_CONTEXT
#include "services/drafter/device_mapped_context.h"
#endif

namespace specd::drafter {
namespace {

class HostMappedContext final : public MappedContext {
 public:
  explicit HostMappedContext(int64_t width) : reader_(width) {}

  v1::TensorHandle::MemoryCase memory() const override { return v1::TensorHandle::kPosixShm; }
  absl::Status Accept(const v1::TensorHandle& handle) override { return reader_.Accept(handle); }
  int64_t rows() const override { return reader_.rows(); }
  at::Tensor Rows(int64_t begin, int64_t end) const override {
    return at::from_blob(const_cast<float*>(reader_.Row(begin)), {end - begin, reader_.width()},
                         at::kFloat);
  }

 private:
  rpc::ContextBufferReader reader_;
};

}  // namespace

std::vector<v1::MemoryKind> MappableMemoryKinds() {
#ifdef SPECD_CUDA_CONTEXT
  return {v1::MEMORY_KIND_POSIX_SHM, v1::MEMORY_KIND_CUDA_IPC};
#else
  return {v1::MEMORY_KIND_POSIX_SHM};
#endif
}

absl::StatusOr<std::unique_ptr<MappedContext>> NewMappedContext(const v1::TensorHandle& handle,
                                                                int64_t width) {
  if (absl::Status checked = rpc::CheckContextHandle(handle, width).status(); !checked.ok()) {
    return checked;
  }
  switch (handle.memory_case()) {
    case v1::TensorHandle::kPosixShm:
      return std::make_unique<HostMappedContext>(width);
    case v1::TensorHandle::kCudaIpc:
#ifdef SPECD_CUDA_CONTEXT
      return NewDeviceMappedContext(width);
#else
      return absl::FailedPreconditionError(
          "context: the verifier's rows are in GPU memory, and this drafter was built without "
          "CUDA");
#endif
    default:  // CheckContextHandle refused it
      return absl::InvalidArgumentError("context: the handle names no memory");
  }
}

}  // namespace specd::drafter
