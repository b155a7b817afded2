#pragma once
// Reads a model's weights out of a mapped checkpoint as tensors on the model's device, checking
// each shape. Errors accumulate: after the first failure every read returns a storage-less meta
// tensor of the asked shape (so building layers still works) and status() names the first
// problem, so a loader reads all its tensors and checks once.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/io/checkpoint.h"
#include "common/io/tensor_view.h"
#include "common/model/linear.h"
#include "common/model/model_options.h"
#include "common/model/named_parameter.h"
#include "common/model/quantized_module_matcher.h"

namespace specd::model {

// The tensor's bytes as a tensor of `dtype` on `device`. float data already of that dtype on the
// CPU is wrapped without a copy and keeps the file mapping alive; anything else is converted.
absl::StatusOr<at::Tensor> TensorFromView(const io::TensorView& view, c10::ScalarType dtype,
                                          c10::Device device);

class WeightReader {
 public:
  // Names passed to the reads below are relative to `prefix` (e.g. "model.language_model.").
  // Linears that `quantized` names are read from their pack-quantized tensors.
  WeightReader(const io::Checkpoint& checkpoint, std::string prefix, ModelOptions options,
               QuantizedModuleMatcher quantized = {});

  // The Linear `module` (e.g. "layers.0.mlp.up_proj"), weight [rows, cols]: dense from
  // `module`.weight, or W4A16 from `module`.weight_packed, ... when the quantization config says
  // so (then only on a float32 CPU model).
  Linear Projection(std::string_view module, int64_t rows, int64_t cols);

  // A projection or embedding matrix, in the model's dtype — or, when the checkpoint stores it in
  // bf16 for a float32 model that does not train, in bf16 as stored (the op table multiplies by
  // it without widening it; TokenHead widens only the rows it embeds).
  at::Tensor Matrix(std::string_view name, int64_t rows, int64_t cols);
  // A tensor of any shape, in the model's dtype.
  at::Tensor Weight(std::string_view name, const std::vector<int64_t>& shape);
  // A small parameter kept in float32 (norm weights, A_log, dt_bias).
  at::Tensor Float32(std::string_view name, const std::vector<int64_t>& shape);

  const absl::Status& status() const { return status_; }
  // Bytes the INT4 projections read so far hold in their kernels' layouts, on the host or
  // uploaded: what a forward reads of them.
  int64_t int4_bytes() const { return int4_bytes_; }
  // Every weight read so far, for a trainable model (ModelOptions::trainable); else empty.
  const std::vector<NamedParameter>& parameters() const { return parameters_; }

 private:
  // `dtype`, or bf16 as stored where `keep_bf16` allows (see Matrix).
  at::Tensor Read(std::string_view name, const std::vector<int64_t>& shape, c10::ScalarType dtype,
                  bool keep_bf16 = false);
  at::Tensor Fail(absl::Status status, const std::vector<int64_t>& shape, c10::ScalarType dtype);

  const io::Checkpoint& checkpoint_;
  std::string prefix_;
  ModelOptions options_;
  QuantizedModuleMatcher quantized_;
  absl::Status status_;
  int64_t int4_bytes_ = 0;
  std::vector<NamedParameter> parameters_;
};

}  // namespace specd::model
