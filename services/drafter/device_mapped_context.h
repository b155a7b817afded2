#pragma once
// MappedContext over CUDA IPC device memory (mapped_context.h); built against a CUDA LibTorch
// only, where NewMappedContext picks it for a cuda_ipc handle.
#include <cstdint>
#include <memory>

#include "services/drafter/mapped_context.h"

namespace specd::drafter {

std::unique_ptr<MappedContext> NewDeviceMappedContext(int64_t width);

}  // namespace specd::drafter
