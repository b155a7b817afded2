#include "common/quantize/quantize_checkpoint.h"

#include <ATen/ATen.h>

#include <deque>
#include <optional>
#include <regex>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/int4/float_encoding.h"
#include "common/int4/pack_quantized_io.h"
#include "common/io/atomic_file.h"
#include "common/io/checkpoint.h"
#include "common/io/checkpoint_writer.h"
#include "common/io/json_file.h"
#include "common/io/quantization_config.h"
#include "common/io/qwen35_config.h"
#include "common/io/safetensors_writer.h"
#include "common/model/quantized_module_matcher.h"

namespace specd::quant {
namespace {

// Files beside the weights that a quantized checkpoint needs unchanged.
constexpr const char* kCopiedFiles[] = {"generation_config.json",
                                        "tokenizer.json",
                                        "tokenizer_config.json",
                                        "special_tokens_map.json",
                                        "added_tokens.json",
                                        "vocab.json",
                                        "merges.txt",
                                        "chat_template.jinja",
                                        "chat_template.json"};

// One input tensor and what becomes of it.
struct Entry {
  const io::TensorView* source = nullptr;
  std::string linear;                    // the Linear module it is the weight of, if quantized
  const at::Tensor* override = nullptr;  // replaces the source's values
  uint64_t output_bytes = 0;
};

// The module of a text-model Linear weight ("model.layers.0.mlp.up_proj" for
// "model.layers.0.mlp.up_proj.weight"), or "" for any other tensor (research/qwen35.md §2).
std::string LinearModule(const io::TensorView& tensor, const std::string& text_prefix) {
  constexpr std::string_view kWeight = ".weight";
  if (tensor.shape.size() != 2 || !tensor.name.ends_with(kWeight)) return "";
  const std::string module = tensor.name.substr(0, tensor.name.size() - kWeight.size());
  if (module == "lm_head") return module;
  static const std::regex kLinear(
      R"(layers\.\d+\.(self_attn\.[qkvo]_proj|linear_attn\.(in_proj_(qkv|z|a|b)|out_proj)|mlp\.(gate|up|down)_proj))");
  const bool linear = module.starts_with(text_prefix) &&
                      std::regex_match(module.substr(text_prefix.size()), kLinear);
  return linear ? module : "";
}

// Bytes PackQuantizedTensors writes for a [rows, cols] weight.
uint64_t PackedBytes(int64_t rows, int64_t cols, int64_t group_size, io::DType scale_dtype,
                     bool symmetric) {
  const int64_t groups = cols / group_size;
  int64_t bytes = 4 * rows * Int4WordCount(cols) +
                  static_cast<int64_t>(io::DTypeSize(scale_dtype)) * rows * groups + 2 * 8;
  if (!symmetric) bytes += 4 * Int4WordCount(rows) * groups;
  return static_cast<uint64_t>(bytes);
}

std::string ShardFileName(size_t index, size_t count) {
  if (count == 1) return io::kSingleFileName;
  return absl::StrFormat("model-%05d-of-%05d.safetensors", index + 1, count);
}

// Which Linears `options` quantizes, decided by the config block it writes, as a loader would.
absl::StatusOr<model::QuantizedModuleMatcher> QuantizedModulesOf(const nlohmann::json& block) {
  absl::StatusOr<std::optional<io::QuantizationConfig>> parsed =
      io::ParseQuantizationConfig({{"quantization_config", block}}, "the quantization options");
  if (!parsed.ok()) return parsed.status();
  return model::QuantizedModuleMatcher::FromConfig(*parsed);
}

absl::StatusOr<std::vector<Entry>> Plan(const io::Checkpoint& checkpoint,
                                        const std::string& text_prefix,
                                        const model::QuantizedModuleMatcher& linears,
                                        const QuantizeOptions& options,
                                        const WeightOverrides* overrides) {
  std::vector<Entry> plan;
  for (const io::TensorView& tensor : checkpoint.tensors()) {
    Entry entry{.source = &tensor,
                .linear = LinearModule(tensor, text_prefix),
                .override = nullptr,
                .output_bytes = tensor.bytes.size()};
    if (!entry.linear.empty() && !linears.Contains(entry.linear)) entry.linear.clear();
    if (!entry.linear.empty()) {
      const int64_t rows = tensor.shape[0], cols = tensor.shape[1];
      const int64_t group_size = options.rtn.group_size == 0 ? cols : options.rtn.group_size;
      if (cols % group_size != 0) {
        return absl::InvalidArgumentError(absl::StrCat("group size ", options.rtn.group_size,
                                                       " does not divide the ", cols,
                                                       " input columns of ", entry.linear));
      }
      if (!IsScaleDType(tensor.dtype)) {
        return absl::InvalidArgumentError(
            absl::StrCat(tensor.name, " is ", io::DTypeName(tensor.dtype),
                         ": only F32, BF16 and F16 weights quantize"));
      }
      entry.output_bytes = PackedBytes(rows, cols, group_size, tensor.dtype, options.rtn.symmetric);
    }
    if (overrides != nullptr) {
      if (auto it = overrides->find(tensor.name); it != overrides->end()) {
        entry.override = &it->second;
        if (!it->second.is_floating_point() || it->second.sizes().vec() != tensor.shape) {
          return absl::InvalidArgumentError(absl::StrCat("the override of ", tensor.name,
                                                         " is not a float tensor of shape [",
                                                         absl::StrJoin(tensor.shape, ", "), "]"));
        }
        if (!IsScaleDType(tensor.dtype)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "an override replaces ", tensor.name, ", which is ", io::DTypeName(tensor.dtype)));
        }
      }
    }
    plan.push_back(std::move(entry));
  }
  if (overrides != nullptr) {
    for (const auto& [name, tensor] : *overrides) {
      if (checkpoint.Find(name) == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("an override names ", name, ", which the checkpoint does not have"));
      }
    }
  }
  return plan;
}

// The values of `entry` as float32: the override's, or the source's decoded.
absl::StatusOr<std::vector<float>> Values(const Entry& entry) {
  if (entry.override == nullptr) return DecodeFloats(*entry.source);
  try {
    const at::Tensor values = entry.override->to(at::kCPU, at::kFloat).contiguous();
    return std::vector<float>(values.data_ptr<float>(), values.data_ptr<float>() + values.numel());
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("the override of ", entry.source->name, ": ", e.what_without_backtrace()));
  }
}

// Appends what `entry` becomes to `views`; the bytes of new tensors live in `owned`.
absl::Status Convert(const Entry& entry, const RtnOptions& rtn, std::deque<OwnedTensor>& owned,
                     std::vector<io::TensorView>& views) {
  const io::TensorView& source = *entry.source;
  if (entry.linear.empty() && entry.override == nullptr) {
    views.push_back(source);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<float>> values = Values(entry);
  if (!values.ok()) return values.status();
  if (entry.linear.empty()) {
    owned.push_back({.name = source.name,
                     .dtype = source.dtype,
                     .shape = source.shape,
                     .data = EncodeFloats(*values, source.dtype)});
    views.push_back(owned.back().View());
    return absl::OkStatus();
  }
  RtnOptions options = rtn;
  options.scale_dtype = source.dtype;
  absl::StatusOr<PackedInt4Weight> packed =
      QuantizeRtn(*values, source.shape[0], source.shape[1], options);
  if (!packed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source.name, ": ", packed.status().message()));
  }
  for (OwnedTensor& tensor : PackQuantizedTensors(*packed, entry.linear)) {
    owned.push_back(std::move(tensor));
    views.push_back(owned.back().View());
  }
  return absl::OkStatus();
}

absl::Status WriteShardIndex(const std::filesystem::path& dir,
                             const std::vector<std::vector<std::string>>& names,
                             uint64_t total_size) {
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t i = 0; i < names.size(); ++i) {
    for (const std::string& name : names[i]) weight_map[name] = ShardFileName(i, names.size());
  }
  const nlohmann::json index = {{"metadata", {{"total_size", total_size}}},
                                {"weight_map", weight_map}};
  return io::WriteFileAtomically(dir / io::kShardIndexFileName, index.dump(2) + "\n");
}

}  // namespace

absl::StatusOr<nlohmann::json> ReadDenseConfig(const std::filesystem::path& model_dir) {
  const std::filesystem::path config_path = model_dir / "config.json";
  absl::StatusOr<nlohmann::json> config = io::ReadJsonFile(config_path);
  if (!config.ok()) return config.status();
  if (config->contains("quantization_config")) {
    return absl::FailedPreconditionError(absl::StrCat(
        config_path.string(), " already has a quantization_config: quantize a dense checkpoint"));
  }
  return config;
}

absl::Status PrepareOutputDir(const std::filesystem::path& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  const bool empty = !error && std::filesystem::is_empty(dir, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot create ", dir.string(), ": ", error.message()));
  }
  if (!empty) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir.string(), " is not empty: write the quantized checkpoint to a new directory"));
  }
  return absl::OkStatus();
}

absl::Status CopySideFiles(const std::filesystem::path& model_dir,
                           const std::filesystem::path& out_dir) {
  for (const char* name : kCopiedFiles) {
    std::error_code error;
    if (!std::filesystem::is_regular_file(model_dir / name)) continue;
    if (!std::filesystem::copy_file(model_dir / name, out_dir / name, error)) {
      return absl::InternalError(
          absl::StrCat("cannot copy ", name, " to ", out_dir.string(), ": ", error.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteConfigJson(const std::filesystem::path& dir, const nlohmann::json& config) {
  return io::WriteFileAtomically(dir / "config.json", config.dump(2) + "\n");
}

std::vector<std::string> DefaultQuantizeIgnore() {
  return {"re:.*lm_head$",   "re:.*embed_tokens$", "re:.*in_proj_a$",
          "re:.*in_proj_b$", "re:.*visual.*",      "re:mtp.*"};
}

nlohmann::json CompressedTensorsConfig(const RtnOptions& rtn,
                                       const std::vector<std::string>& ignore) {
  const bool channel = rtn.group_size == 0;
  const nlohmann::json weights = {
      {"num_bits", 4},
      {"type", "int"},
      {"symmetric", rtn.symmetric},
      {"strategy", channel ? "channel" : "group"},
      {"group_size", channel ? nlohmann::json(nullptr) : nlohmann::json(rtn.group_size)},
      {"dynamic", false},
      {"actorder", nullptr},
      {"block_structure", nullptr},
      {"observer", "minmax"},
      {"observer_kwargs", nlohmann::json::object()}};
  const nlohmann::json group = {{"targets", nlohmann::json::array({"Linear"})},
                                {"weights", weights},
                                {"input_activations", nullptr},
                                {"output_activations", nullptr},
                                {"format", "pack-quantized"}};
  return {{"quant_method", "compressed-tensors"},
          {"format", "pack-quantized"},
          {"quantization_status", "compressed"},
          {"config_groups", {{"group_0", group}}},
          {"ignore", ignore},
          {"kv_cache_scheme", nullptr}};
}

absl::Status QuantizeCheckpoint(const std::filesystem::path& model_dir,
                                const std::filesystem::path& out_dir,
                                const QuantizeOptions& options,
                                const std::function<void(const QuantizeProgress&)>& progress,
                                const WeightOverrides* overrides) {
  const std::filesystem::path config_path = model_dir / "config.json";
  absl::StatusOr<nlohmann::json> config = ReadDenseConfig(model_dir);
  if (!config.ok()) return config.status();
  absl::StatusOr<io::Qwen35TextConfig> text_config =
      io::ParseQwen35TextConfig(*config, config_path.string());
  if (!text_config.ok()) return text_config.status();
  if (options.rtn.group_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("group size ", options.rtn.group_size, " is negative (0: one scale per row)"));
  }
  const nlohmann::json block = CompressedTensorsConfig(options.rtn, options.ignore);
  absl::StatusOr<model::QuantizedModuleMatcher> linears = QuantizedModulesOf(block);
  if (!linears.ok()) return linears.status();
  absl::StatusOr<io::Checkpoint> checkpoint = io::Checkpoint::Open(model_dir);
  if (!checkpoint.ok()) return checkpoint.status();
  absl::StatusOr<std::vector<Entry>> plan =
      Plan(*checkpoint, text_config->tensor_prefix, *linears, options, overrides);
  if (!plan.ok()) return plan.status();
  if (absl::Status status = PrepareOutputDir(out_dir); !status.ok()) return status;

  const std::vector<std::span<const Entry>> shards =
      io::SplitIntoShards(std::span<const Entry>(*plan), options.max_shard_bytes,
                          [](const Entry& entry) { return entry.output_bytes; });
  std::vector<std::vector<std::string>> shard_names;
  uint64_t total_size = 0;
  int64_t done = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    std::deque<OwnedTensor> owned;  // a deque: the views keep pointing into its elements
    std::vector<io::TensorView> views;
    for (const Entry& entry : shards[i]) {
      if (absl::Status status = Convert(entry, options.rtn, owned, views); !status.ok()) {
        return status;
      }
      if (progress) {
        progress({.done = ++done,
                  .total = static_cast<int64_t>(plan->size()),
                  .name = entry.source->name,
                  .quantized = !entry.linear.empty()});
      }
    }
    shard_names.emplace_back();
    for (const io::TensorView& view : views) {
      shard_names.back().push_back(view.name);
      total_size += view.bytes.size();
    }
    if (absl::Status status = io::WriteSafetensorsFile(out_dir / ShardFileName(i, shards.size()),
                                                       views, {{"format", "pt"}});
        !status.ok()) {
      return status;
    }
  }
  if (shards.size() > 1) {
    if (absl::Status status = WriteShardIndex(out_dir, shard_names, total_size); !status.ok()) {
      return status;
    }
  }

  if (absl::Status status = CopySideFiles(model_dir, out_dir); !status.ok()) return status;
  // Last, so that a directory whose config claims quantized weights has all of them.
  (*config)["quantization_config"] = block;
  return WriteConfigJson(out_dir, *config);
}

}  // namespace specd::quant
