#include "common/model/weight_reader.h"

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/int4/int4_kernel_weight.h"
#include "common/int4/pack_quantized_io.h"

namespace specd::model {
namespace {

std::optional<c10::ScalarType> ScalarTypeOf(io::DType dtype) {
  switch (dtype) {
    case io::DType::kBool:
      return c10::kBool;
    case io::DType::kU8:
      return c10::kByte;
    case io::DType::kI8:
      return c10::kChar;
    case io::DType::kI16:
      return c10::kShort;
    case io::DType::kI32:
      return c10::kInt;
    case io::DType::kI64:
      return c10::kLong;
    case io::DType::kF16:
      return c10::kHalf;
    case io::DType::kBF16:
      return c10::kBFloat16;
    case io::DType::kF32:
      return c10::kFloat;
    case io::DType::kF64:
      return c10::kDouble;
  }
  return std::nullopt;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace

absl::StatusOr<at::Tensor> TensorFromView(const io::TensorView& view, c10::ScalarType dtype,
                                          c10::Device device) {
  const std::optional<c10::ScalarType> stored = ScalarTypeOf(view.dtype);
  if (!stored.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(view.name, ": unsupported dtype ", io::DTypeName(view.dtype)));
  }
  // The mapping is read-only: the wrapped tensor is never written, and the deleter keeps the
  // mapping alive for as long as the tensor (or a view of it) is.
  auto* data = const_cast<std::byte*>(view.bytes.data());
  try {
    at::Tensor mapped = at::from_blob(
        data, view.shape, [owner = view.owner](void*) {}, at::TensorOptions().dtype(*stored));
    if (*stored == dtype && device.is_cpu()) return mapped;
    return mapped.to(device, dtype);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(view.name, ": ", e.what_without_backtrace()));
  }
}

WeightReader::WeightReader(const io::Checkpoint& checkpoint, std::string prefix,
                           ModelOptions options, QuantizedModuleMatcher quantized)
    : checkpoint_(checkpoint),
      prefix_(std::move(prefix)),
      options_(options),
      quantized_(std::move(quantized)) {}

Linear WeightReader::Projection(std::string_view module, int64_t rows, int64_t cols) {
  const std::string full_name = prefix_ + std::string(module);
  if (!quantized_.Contains(full_name))
    return Linear(full_name, Matrix(std::string(module) + ".weight", rows, cols));
  const std::vector<int64_t> shape = {rows, cols};
  if (!status_.ok()) return Linear(full_name, Fail(status_, shape, options_.dtype));
  absl::StatusOr<quant::PackedInt4Weight> packed =
      quant::LoadPackedInt4Weight(checkpoint_, full_name);
  if (!packed.ok()) return Linear(full_name, Fail(packed.status(), shape, options_.dtype));
  if (packed->grid.rows != rows || packed->grid.cols != cols) {
    return Linear(full_name, Fail(absl::InvalidArgumentError(absl::StrCat(
                                      full_name, ".weight_shape is ",
                                      ShapeString({packed->grid.rows, packed->grid.cols}),
                                      ", expected ", ShapeString(shape), " from config.json")),
                                  shape, options_.dtype));
  }
  if (options_.trainable) {
    absl::StatusOr<FakeQuantLinear> fake_quant = FakeQuantLinear::FromPacked(*packed);
    if (!fake_quant.ok()) {
      return Linear(full_name, Fail(absl::InvalidArgumentError(absl::StrCat(
                                        full_name, ": ", fake_quant.status().message())),
                                    shape, options_.dtype));
    }
    auto linear = std::make_shared<FakeQuantLinear>(*std::move(fake_quant));
    parameters_.push_back({full_name + ".weight", linear->weight(), linear});
    return Linear(full_name, std::shared_ptr<const FakeQuantLinear>(linear));
  }
  const auto failed = [&](const absl::Status& status) {
    return Linear(full_name,
                  Fail(absl::Status(status.code(), absl::StrCat(full_name, ": ", status.message())),
                       shape, options_.dtype));
  };
  // Off the CPU the weight is uploaded from the exact layout: the other modes are the CPU's.
  const bool on_cpu = options_.device.is_cpu();
  if (!on_cpu && options_.int4_activations != quant::Int4Activations::kExact) {
    return failed(absl::InvalidArgumentError(
        absl::StrCat(quant::Int4ActivationsName(options_.int4_activations),
                     " INT4 activations are a CPU mode; on ", options_.device.str(),
                     " W4A16 takes the model's own")));
  }
  absl::StatusOr<quant::Int4KernelWeight> kernel =
      quant::Int4KernelWeight::Prepare(*packed, options_.int4_activations);
  if (!kernel.ok()) return failed(kernel.status());
  if (on_cpu) {
    int4_bytes_ += kernel->ByteSize();
    return Linear(full_name, std::make_shared<const quant::Int4KernelWeight>(*std::move(kernel)));
  }
  absl::StatusOr<ops::Int4Tensors> on_device = ops::Int4Tensors::Upload(*kernel, options_.device);
  if (!on_device.ok()) return failed(on_device.status());
  int4_bytes_ += on_device->ByteSize();
  return Linear(full_name, std::make_shared<const ops::Int4Tensors>(*std::move(on_device)));
}

at::Tensor WeightReader::Matrix(std::string_view name, int64_t rows, int64_t cols) {
  return Read(name, {rows, cols}, options_.dtype,
              /*keep_bf16=*/!options_.trainable && options_.dtype == c10::kFloat);
}

at::Tensor WeightReader::Weight(std::string_view name, const std::vector<int64_t>& shape) {
  return Read(name, shape, options_.dtype);
}

at::Tensor WeightReader::Float32(std::string_view name, const std::vector<int64_t>& shape) {
  return Read(name, shape, c10::kFloat);
}

at::Tensor WeightReader::Read(std::string_view name, const std::vector<int64_t>& shape,
                              c10::ScalarType dtype, bool keep_bf16) {
  if (!status_.ok()) return Fail(status_, shape, dtype);
  const std::string full_name = prefix_ + std::string(name);
  absl::StatusOr<const io::TensorView*> view = checkpoint_.Get(full_name);
  if (!view.ok()) return Fail(view.status(), shape, dtype);
  if ((*view)->shape != shape) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(full_name, " has shape ",
                                                        ShapeString((*view)->shape), ", expected ",
                                                        ShapeString(shape), " from config.json")),
                shape, dtype);
  }
  if (keep_bf16 && (*view)->dtype == io::DType::kBF16) dtype = c10::kBFloat16;
  absl::StatusOr<at::Tensor> tensor = TensorFromView(**view, dtype, options_.device);
  if (!tensor.ok()) return Fail(tensor.status(), shape, dtype);
  if (!options_.trainable) return *std::move(tensor);
  at::Tensor parameter = tensor->clone().requires_grad_();
  parameters_.push_back({full_name, parameter, nullptr});
  return parameter;
}

at::Tensor WeightReader::Fail(absl::Status status, const std::vector<int64_t>& shape,
                              c10::ScalarType dtype) {
  status_ = std::move(status);
  return at::empty(shape, at::TensorOptions().dtype(dtype).device(c10::kMeta));
}

}  // namespace specd::model
