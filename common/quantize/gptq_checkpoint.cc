#include "common/quantize/gptq_checkpoint.h"

#include <ATen/ATen.h>

#include <deque>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/int4/float_encoding.h"
#include "common/int4/pack_quantized_io.h"
#include "common/io/checkpoint.h"
#include "common/io/checkpoint_writer.h"
#include "common/io/json_file.h"

namespace specd::quant {
namespace {

constexpr std::string_view kWeight = ".weight";

// The module `tensor` is the weight of if it is a two-dimensional `<module>.weight`, else "".
std::string MatrixModule(const io::TensorView& tensor) {
  if (tensor.shape.size() != 2 || !tensor.name.ends_with(kWeight)) return "";
  return tensor.name.substr(0, tensor.name.size() - kWeight.size());
}

// Refuses Hessians that name no quantizable weight of `checkpoint` or do not fit it.
absl::Status CheckHessians(const io::Checkpoint& checkpoint, const LinearHessians& hessians,
                           const GptqOptions& options) {
  for (const auto& [module, hessian] : hessians) {
    const io::TensorView* weight = checkpoint.Find(module + std::string(kWeight));
    if (weight == nullptr || MatrixModule(*weight) != module) {
      return absl::InvalidArgumentError(
          absl::StrCat("a Hessian names ", module, ", which is not a Linear of the checkpoint (no ",
                       module, ".weight [out, in])"));
    }
    if (!IsScaleDType(weight->dtype)) {
      return absl::InvalidArgumentError(absl::StrCat(weight->name, " is ",
                                                     io::DTypeName(weight->dtype),
                                                     ": only F32, BF16 and F16 weights quantize"));
    }
    const int64_t in = weight->shape[1];
    if (!hessian.defined() || !hessian.is_floating_point() || hessian.dim() != 2 ||
        hessian.size(0) != in || hessian.size(1) != in) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the Hessian of ", module, " must be a float [", in, ", ", in, "] for its weight [",
          absl::StrJoin(weight->shape, ", "), "], got ",
          hessian.defined() ? absl::StrCat("[", absl::StrJoin(hessian.sizes(), ", "), "]")
                            : std::string("an undefined tensor")));
    }
    if (options.group_size < 0 || (options.group_size > 0 && in % options.group_size != 0)) {
      return absl::InvalidArgumentError(absl::StrCat("group size ", options.group_size,
                                                     " does not divide the ", in,
                                                     " input columns of ", module));
    }
  }
  return absl::OkStatus();
}

// The compressed-tensors tensors of `source` (a weight [out, in]) GPTQ-quantized.
absl::StatusOr<std::vector<OwnedTensor>> QuantizeWeight(const io::TensorView& source,
                                                        const std::string& module,
                                                        const at::Tensor& hessian,
                                                        GptqOptions options) {
  absl::StatusOr<std::vector<float>> values = DecodeFloats(source);
  if (!values.ok()) return values.status();
  options.scale_dtype = source.dtype;
  absl::StatusOr<PackedInt4Weight> packed =
      GptqQuantize(at::from_blob(values->data(), {source.shape[0], source.shape[1]}, at::kFloat),
                   hessian, options);
  if (!packed.ok()) {
    return absl::Status(packed.status().code(),
                        absl::StrCat(module, ": ", packed.status().message()));
  }
  return PackQuantizedTensors(*packed, module);
}

}  // namespace

nlohmann::json GptqCompressedTensorsConfig(const GptqOptions& options,
                                           const std::vector<std::string>& ignore) {
  nlohmann::json block = CompressedTensorsConfig(
      {.group_size = options.group_size, .symmetric = options.symmetric}, ignore);
  if (options.act_order) block["config_groups"]["group_0"]["weights"]["actorder"] = "group";
  return block;
}

absl::Status WriteGptqCheckpoint(const std::filesystem::path& model_dir,
                                 const LinearHessians& hessians, const GptqOptions& options,
                                 const std::filesystem::path& out_dir,
                                 const std::function<void(const QuantizeProgress&)>& progress) {
  absl::StatusOr<nlohmann::json> config = ReadDenseConfig(model_dir);
  if (!config.ok()) return config.status();
  absl::StatusOr<io::Checkpoint> checkpoint = io::Checkpoint::Open(model_dir);
  if (!checkpoint.ok()) return checkpoint.status();
  if (absl::Status status = CheckHessians(*checkpoint, hessians, options); !status.ok()) {
    return status;
  }
  std::vector<std::string> dense;
  for (const io::TensorView& tensor : checkpoint->tensors()) {
    const std::string module = MatrixModule(tensor);
    if (!module.empty() && !hessians.contains(module)) dense.push_back(module);
  }
  const nlohmann::json block = GptqCompressedTensorsConfig(options, dense);
  if (absl::Status status = PrepareOutputDir(out_dir); !status.ok()) return status;

  std::deque<OwnedTensor> owned;  // a deque: the views keep pointing into its elements
  std::vector<io::TensorView> views;
  const auto total = static_cast<int64_t>(checkpoint->tensors().size());
  int64_t done = 0;
  for (const io::TensorView& tensor : checkpoint->tensors()) {
    const std::string module = MatrixModule(tensor);
    const auto hessian = hessians.find(module);
    const bool quantized = !module.empty() && hessian != hessians.end();
    if (quantized) {
      absl::StatusOr<std::vector<OwnedTensor>> tensors =
          QuantizeWeight(tensor, module, hessian->second, options);
      if (!tensors.ok()) return tensors.status();
      for (OwnedTensor& packed : *tensors) {
        owned.push_back(std::move(packed));
        views.push_back(owned.back().View());
      }
      checkpoint->ReleaseResidentPages(tensor);
    } else {
      views.push_back(tensor);
    }
    if (progress) {
      progress({.done = ++done, .total = total, .name = tensor.name, .quantized = quantized});
    }
  }
  if (absl::Status status = io::WriteCheckpointTensors(
          out_dir, views, QuantizeOptions().max_shard_bytes, {{"format", "pt"}});
      !status.ok()) {
    return status;
  }
  if (absl::Status status = CopySideFiles(model_dir, out_dir); !status.ok()) return status;
  (*config)["quantization_config"] = block;
  return WriteConfigJson(out_dir, *config);
}

}  // namespace specd::quant
