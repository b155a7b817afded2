#include "training/parameter_io.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/int4/pack_quantized_io.h"
#include "common/io/checkpoint_writer.h"
#include "common/io/safetensors_file.h"
#include "common/io/safetensors_writer.h"
#include "common/quantize/quantize_checkpoint.h"

namespace specd::train {
namespace {

// Contiguous float32 copies of dense tensors and the packed tensors of fake-quant ones, with
// views into them for the writer.
class TensorsToWrite {
 public:
  void AddDense(const std::string& name, const at::Tensor& tensor) {
    const at::Tensor& kept =
        dense_.emplace_back(tensor.detach().to(at::kCPU, at::kFloat).contiguous());
    views_.push_back({.name = name,
                      .dtype = io::DType::kF32,
                      .shape = kept.sizes().vec(),
                      .bytes = {static_cast<const std::byte*>(kept.data_ptr()), kept.nbytes()},
                      .owner = nullptr});
  }
  void AddPacked(const quant::PackedInt4Weight& weight, const std::string& module) {
    for (quant::OwnedTensor& tensor : quant::PackQuantizedTensors(weight, module)) {
      packed_.push_back(std::move(tensor));
      views_.push_back(packed_.back().View());
    }
  }
  const std::vector<io::TensorView>& views() const { return views_; }

 private:
  std::deque<at::Tensor> dense_;
  std::deque<quant::OwnedTensor> packed_;  // a deque: the views point into its elements
  std::vector<io::TensorView> views_;
};

std::string ModuleOf(const std::string& weight_name) {
  return weight_name.substr(0, weight_name.rfind(".weight"));
}

}  // namespace

absl::Status SaveParameters(std::span<const model::NamedParameter> parameters,
                            const std::filesystem::path& file) {
  try {
    TensorsToWrite tensors;
    for (const model::NamedParameter& parameter : parameters) {
      tensors.AddDense(parameter.name, parameter.tensor);
    }
    std::filesystem::create_directories(file.parent_path());
    return io::WriteSafetensorsFile(file, tensors.views(), {{"format", "pt"}});
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("saving parameters to ", file.string(), ": ", e.what()));
  }
}

absl::Status LoadParameters(std::span<const model::NamedParameter> parameters,
                            const std::filesystem::path& file) {
  absl::StatusOr<io::SafetensorsFile> saved = io::SafetensorsFile::Open(file);
  if (!saved.ok()) return saved.status();
  std::vector<at::Tensor> values;
  for (const model::NamedParameter& parameter : parameters) {
    const io::TensorView* view = saved->Find(parameter.name);
    if (view == nullptr) {
      return absl::NotFoundError(absl::StrCat(file.string(), " has no ", parameter.name));
    }
    if (view->dtype != io::DType::kF32 || view->shape != parameter.tensor.sizes().vec()) {
      return absl::InvalidArgumentError(absl::StrCat(file.string(), ": ", parameter.name,
                                                     " is not float32 of the parameter's shape"));
    }
    values.push_back(
        at::from_blob(const_cast<std::byte*>(view->bytes.data()), view->shape, at::kFloat));
  }
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < values.size(); ++i) parameters[i].tensor.copy_(values[i]);
  return absl::OkStatus();
}

absl::Status ExportCheckpoint(std::span<const model::NamedParameter> parameters,
                              const std::filesystem::path& source_dir,
                              const std::filesystem::path& out_dir) {
  TensorsToWrite tensors;
  for (const model::NamedParameter& parameter : parameters) {
    if (parameter.fake_quant == nullptr) {
      tensors.AddDense(parameter.name, parameter.tensor);
      continue;
    }
    absl::StatusOr<quant::PackedInt4Weight> packed = parameter.fake_quant->Pack();
    if (!packed.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(parameter.name, ": ", packed.status().message()));
    }
    tensors.AddPacked(*packed, ModuleOf(parameter.name));
  }
  // Written beside the target and renamed onto it, so an export replacing an earlier one (the
  // best model so far) never leaves a mix of the two.
  std::filesystem::path staging = out_dir;
  staging += ".partial";
  std::error_code error;
  std::filesystem::remove_all(staging, error);
  std::filesystem::create_directories(staging, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create ", staging.string(), ": ", error.message()));
  }
  if (absl::Status status = io::WriteCheckpointTensors(staging, tensors.views(), io::kMaxShardBytes,
                                                       {{"format", "pt"}});
      !status.ok()) {
    return status;
  }
  if (absl::Status status = quant::CopySideFiles(source_dir, staging); !status.ok()) return status;
  std::filesystem::copy_file(source_dir / "config.json", staging / "config.json", error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot copy ", (source_dir / "config.json").string(), ": ", error.message()));
  }
  std::filesystem::remove_all(out_dir, error);
  if (!error) std::filesystem::rename(staging, out_dir, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot move ", staging.string(), " to ",
                                            out_dir.string(), ": ", error.message()));
  }
  return absl::OkStatus();
}

}  // namespace specd::train
