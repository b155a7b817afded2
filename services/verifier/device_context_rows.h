#pragma once
// ContextRows in device memory shared through CUDA IPC (context_rows.h); built against a CUDA
// LibTorch only, where OpenContextRows picks it for a model on a GPU.
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/model/model_options.h"
#include "services/verifier/context_rows.h"

namespace specd::verifier {

absl::StatusOr<std::unique_ptr<ContextRows>> OpenDeviceContextRows(
    std::string owner_instance_id, uint64_t buffer_id, int64_t rows, int64_t width,
    const model::ModelOptions& model);

}  // namespace specd::verifier
