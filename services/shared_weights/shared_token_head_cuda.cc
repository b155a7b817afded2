// ShareTokenHead and MapTokenHead against a CUDA LibTorch: the tensors' own allocations, found
// through LibTorch's caching allocator, exported and mapped with CUDA IPC.
#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/torch_errors.h"
#include "common/rpc/cuda_ipc_region.h"
#include "services/shared_weights/shared_token_head.h"

namespace specd::shared_weights {
namespace {

absl::StatusOr<v1::Dtype> DtypeOf(const at::Tensor& tensor) {
  switch (tensor.scalar_type()) {
    case at::kBFloat16:
      return v1::DTYPE_BFLOAT16;
    case at::kFloat:
      return v1::DTYPE_FLOAT32;
    default:
      return absl::InvalidArgumentError(absl::StrCat("a shared weight is bf16 or float32, not ",
                                                     c10::toString(tensor.scalar_type())));
  }
}

// A handle to `tensor`'s bytes inside the cudaMalloc allocation LibTorch carved it from (CUDA IPC
// exports whole allocations).
absl::StatusOr<v1::TensorHandle> Share(const at::Tensor& tensor, const std::string& owner,
                                       uint64_t buffer_id) {
  if (!tensor.is_contiguous()) {
    return absl::InvalidArgumentError("a shared weight must be contiguous");
  }
  absl::StatusOr<v1::Dtype> dtype = DtypeOf(tensor);
  if (!dtype.ok()) return dtype.status();
  size_t allocation_bytes = 0;
  absl::StatusOr<void*> found = base::CatchTorchErrors("the allocation of a shared weight", [&] {
    return c10::cuda::CUDACachingAllocator::getBaseAllocation(tensor.data_ptr(), &allocation_bytes);
  });
  if (!found.ok()) return found.status();
  void* base = *found;
  absl::StatusOr<v1::CudaIpcRegion> region =
      rpc::ExportAllocation(base, allocation_bytes, tensor.device().index());
  if (!region.ok()) return region.status();
  v1::TensorHandle handle;
  *handle.mutable_cuda_ipc() = *std::move(region);
  handle.set_owner_instance_id(owner);
  handle.set_buffer_id(buffer_id);
  handle.set_dtype(*dtype);
  for (const int64_t size : tensor.sizes()) handle.add_shape(size);
  handle.set_byte_offset(static_cast<uint64_t>(static_cast<const char*>(tensor.data_ptr()) -
                                               static_cast<const char*>(base)));
  handle.set_byte_size(tensor.nbytes());
  handle.set_generation(0);  // memory that never changes
  return handle;
}

}  // namespace

absl::StatusOr<std::map<std::string, v1::TensorHandle>> ShareTokenHead(
    const model::TokenHead& head, const std::string& owner_instance_id, uint64_t first_buffer_id) {
  std::map<std::string, v1::TensorHandle> shared;
  if (!head.embed_tokens().is_cuda()) return shared;
  absl::StatusOr<v1::TensorHandle> embed =
      Share(head.embed_tokens(), owner_instance_id, first_buffer_id);
  if (!embed.ok()) return embed.status();
  shared[kEmbedTokens] = *embed;
  if (!head.lm_head().defined() || head.lm_head().is_same(head.embed_tokens())) {
    shared[kLmHead] = *std::move(embed);  // tied
    return shared;
  }
  absl::StatusOr<v1::TensorHandle> lm_head =
      Share(head.lm_head(), owner_instance_id, first_buffer_id + 1);
  if (!lm_head.ok()) return lm_head.status();
  shared[kLmHead] = *std::move(lm_head);
  return shared;
}

absl::StatusOr<model::TokenHead> MapTokenHead(
    const google::protobuf::Map<std::string, v1::TensorHandle>& shared,
    const io::Qwen35TextConfig& config, const model::ModelOptions& options) {
  if (!options.device.is_cuda()) {
    return absl::FailedPreconditionError(
        "a verifier's embedding and head are mapped on its GPU: run the drafter with --device "
        "cuda");
  }
  // One mapping per exported allocation (a tied head names the embedding's).
  std::map<std::string, std::shared_ptr<rpc::CudaIpcMapping>> mappings;
  const auto map = [&](const char* name) -> absl::StatusOr<at::Tensor> {
    const auto found = shared.find(name);
    if (found == shared.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the verifier shares no ", name, " (a verifier on the CPU shares no weights)"));
    }
    const v1::TensorHandle& handle = found->second;
    const int64_t element_bytes = handle.dtype() == v1::DTYPE_BFLOAT16  ? 2
                                  : handle.dtype() == v1::DTYPE_FLOAT32 ? 4
                                                                        : 0;
    const uint64_t expected_bytes =
        static_cast<uint64_t>(config.vocab_size * config.hidden_size * element_bytes);
    if (!handle.has_cuda_ipc() || element_bytes == 0 || handle.shape_size() != 2 ||
        handle.shape(0) != config.vocab_size || handle.shape(1) != config.hidden_size ||
        !handle.strides().empty() || handle.byte_size() != expected_bytes ||
        handle.byte_offset() % element_bytes != 0 ||
        handle.byte_offset() > handle.cuda_ipc().size_bytes() ||
        handle.byte_size() > handle.cuda_ipc().size_bytes() - handle.byte_offset()) {
      return absl::InvalidArgumentError(
          absl::StrCat("shared ", name, " is not a contiguous float32 or bf16 [", config.vocab_size,
                       ", ", config.hidden_size, "] tensor inside its CUDA IPC region"));
    }
    std::shared_ptr<rpc::CudaIpcMapping>& mapping = mappings[handle.cuda_ipc().memory_handle()];
    if (mapping == nullptr) {
      absl::StatusOr<rpc::CudaIpcMapping> opened = rpc::CudaIpcMapping::Open(handle.cuda_ipc());
      if (!opened.ok()) return opened.status();
      mapping = std::make_shared<rpc::CudaIpcMapping>(*std::move(opened));
    }
    void* data =
        const_cast<char*>(static_cast<const char*>(mapping->data()) + handle.byte_offset());
    return at::from_blob(
        data, {config.vocab_size, config.hidden_size}, [mapping](void*) {},
        at::TensorOptions()
            .dtype(element_bytes == 2 ? at::kBFloat16 : at::kFloat)
            .device(c10::kCUDA, static_cast<c10::DeviceIndex>(mapping->device())));
  };
  absl::StatusOr<at::Tensor> embed = map(kEmbedTokens);
  if (!embed.ok()) return embed.status();
  absl::StatusOr<at::Tensor> lm_head = map(kLmHead);
  if (!lm_head.ok()) return lm_head.status();
  if (lm_head->data_ptr() == embed->data_ptr()) lm_head = *embed;  // tied: one tensor
  return base::CatchTorchErrors("the verifier's embedding and head", [&] {
    return model::TokenHead(*std::move(embed), *std::move(lm_head), options);
  });
}

}  // namespace specd::shared_weights
