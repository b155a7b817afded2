#pragma once
// A verifier session's context buffer: the committed rows of the layers its drafter reads, and the
// handle that names them. For a model on the CPU, host memory (POSIX shared memory, float32); for
// a model on a GPU, device memory shared through CUDA IPC in the model's dtype, so the rows never
// leave the device and a drafter on the same GPU reads them in place.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/model/model_options.h"
#include "specd/v1/types.pb.h"

namespace specd::verifier {

class ContextRows {
 public:
  virtual ~ContextRows() = default;
  // Writes `rows` [count, width] (on the model's device) to positions [begin, begin + count) and
  // returns the handle naming those positions valid, at the buffer's next generation.
  virtual absl::StatusOr<v1::TensorHandle> Publish(int64_t begin, const at::Tensor& rows) = 0;
};

// Where the rows of a model with these options go, and in what dtype: CUDA IPC and the model's
// dtype (bf16 or float32) on a GPU, POSIX shared memory and float32 on the CPU.
v1::MemoryKind ContextMemoryKind(const model::ModelOptions& model);
v1::Dtype ContextDtype(const model::ModelOptions& model);

// A [rows, width] buffer in the memory `model` computes in. FAILED_PRECONDITION for a model on a
// GPU in a build without CUDA.
absl::StatusOr<std::unique_ptr<ContextRows>> OpenContextRows(std::string owner_instance_id,
                                                             uint64_t buffer_id, int64_t rows,
                                                             int64_t width,
                                                             const model::ModelOptions& model);

}  // namespace specd::verifier
