#include "common/io/checkpoint_summary.h"

#include <algorithm>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/io/checkpoint.h"
#include "common/io/json_file.h"

namespace specd::io {
namespace {

using nlohmann::json;
using Lines = std::vector<std::pair<std::string, std::string>>;  // label, value

// A DFlash drafter is a Qwen3 config plus `dflash_config`; anything else must be a Qwen3.5 target.
absl::StatusOr<std::variant<Qwen35TextConfig, DFlashDraftConfig>> ParseModelConfig(
    const json& config, const std::string& source) {
  if (config.is_object() && config.contains("dflash_config")) {
    absl::StatusOr<DFlashDraftConfig> drafter = ParseDFlashDraftConfig(config, source);
    if (!drafter.ok()) return drafter.status();
    return *std::move(drafter);
  }
  absl::StatusOr<Qwen35TextConfig> target = ParseQwen35TextConfig(config, source);
  if (!target.ok()) return target.status();
  return *std::move(target);
}

std::map<std::string, int64_t> CountLayerTypes(const Qwen35TextConfig& config) {
  std::map<std::string, int64_t> counts;
  for (LayerType type : config.layer_types) ++counts[LayerTypeName(type)];
  return counts;
}

// "817952 bytes (798.8 KiB)"
std::string DescribeBytes(int64_t bytes) {
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " bytes");
  double scaled = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (scaled >= 1024 && unit + 1 < std::size(kUnits)) {
    scaled /= 1024;
    ++unit;
  }
  return absl::StrFormat("%d bytes (%.1f %s)", bytes, scaled, kUnits[unit]);
}

json ArgsToJson(const std::optional<QuantizationArgs>& args) {
  if (!args) return nullptr;
  return {{"num_bits", args->num_bits},
          {"type", args->type},
          {"symmetric", args->symmetric},
          {"strategy", args->strategy},
          {"group_size", args->group_size ? json(*args->group_size) : json(nullptr)},
          {"actorder", args->actorder ? json(*args->actorder) : json(nullptr)}};
}

json QuantizationToJson(const std::optional<QuantizationConfig>& quantization) {
  if (!quantization) return nullptr;
  json groups = json::array();
  for (const QuantizationGroup& group : quantization->groups) {
    groups.push_back({{"name", group.name},
                      {"scheme", QuantizationSchemeName(group)},
                      {"targets", group.targets},
                      {"weights", ArgsToJson(group.weights)},
                      {"input_activations", ArgsToJson(group.input_activations)}});
  }
  return {{"quant_method", quantization->quant_method},
          {"format", quantization->format},
          {"groups", groups},
          {"ignore", quantization->ignore}};
}

// "compressed-tensors pack-quantized: W4A16 (int4 symmetric group 32) on Linear; ignoring lm_head"
std::string DescribeQuantization(const std::optional<QuantizationConfig>& quantization) {
  if (!quantization) return "none";
  std::vector<std::string> groups;
  for (const QuantizationGroup& group : quantization->groups) {
    std::string text = QuantizationSchemeName(group);
    if (group.weights) {
      const QuantizationArgs& weights = *group.weights;
      absl::StrAppend(&text, " (", weights.type, weights.num_bits, " ",
                      weights.symmetric ? "symmetric" : "asymmetric", " ", weights.strategy);
      if (weights.group_size) absl::StrAppend(&text, " ", *weights.group_size);
      if (weights.actorder) absl::StrAppend(&text, ", actorder ", *weights.actorder);
      absl::StrAppend(&text, ")");
    }
    absl::StrAppend(&text, " on ", absl::StrJoin(group.targets, ", "));
    groups.push_back(std::move(text));
  }
  std::string text = absl::StrCat(quantization->quant_method, " ", quantization->format, ": ",
                                  absl::StrJoin(groups, "; "));
  if (!quantization->ignore.empty()) {
    absl::StrAppend(&text, "; ignoring ", absl::StrJoin(quantization->ignore, ", "));
  }
  return text;
}

json ModelToJson(const Qwen35TextConfig& config) {
  return {{"architecture", config.architecture},
          {"model_type", config.model_type},
          {"num_layers", config.num_hidden_layers},
          {"layer_types", CountLayerTypes(config)},
          {"hidden_size", config.hidden_size},
          {"num_attention_heads", config.num_attention_heads},
          {"num_key_value_heads", config.num_key_value_heads},
          {"head_dim", config.head_dim},
          {"vocab_size", config.vocab_size},
          {"tie_word_embeddings", config.tie_word_embeddings}};
}

json ModelToJson(const DFlashDraftConfig& config) {
  return {{"architecture", config.architecture},
          {"model_type", "qwen3"},
          {"num_layers", config.num_hidden_layers},
          {"layer_types", {{"full_attention", config.num_hidden_layers}}},
          {"hidden_size", config.hidden_size},
          {"num_attention_heads", config.num_attention_heads},
          {"num_key_value_heads", config.num_key_value_heads},
          {"head_dim", config.head_dim},
          {"vocab_size", config.vocab_size},
          {"drafter",
           {{"block_size", config.block_size},
            {"target_layer_ids", config.target_layer_ids},
            {"num_target_layers", config.num_target_layers},
            {"mask_token_id", config.mask_token_id}}}};
}

std::string DescribeHeads(int64_t query_heads, int64_t key_value_heads, int64_t head_dim) {
  return absl::StrCat(query_heads, " query, ", key_value_heads, " key/value, head_dim ", head_dim);
}

Lines ModelLines(const Qwen35TextConfig& config) {
  std::vector<std::string> type_counts;
  for (const auto& [type, count] : CountLayerTypes(config)) {
    type_counts.push_back(absl::StrCat(count, " ", type));
  }
  return {
      {"architecture", absl::StrCat(config.architecture, " (model_type ", config.model_type, ")")},
      {"layers",
       absl::StrCat(config.num_hidden_layers, " (", absl::StrJoin(type_counts, ", "), ")")},
      {"hidden size", absl::StrCat(config.hidden_size)},
      {"attention heads",
       DescribeHeads(config.num_attention_heads, config.num_key_value_heads, config.head_dim)},
      {"vocab size", absl::StrCat(config.vocab_size)},
      {"tied embeddings", config.tie_word_embeddings ? "yes" : "no"}};
}

Lines ModelLines(const DFlashDraftConfig& config) {
  return {
      {"architecture", absl::StrCat(config.architecture, " (model_type qwen3)")},
      {"layers",
       absl::StrCat(config.num_hidden_layers, " (", config.num_hidden_layers, " full_attention)")},
      {"hidden size", absl::StrCat(config.hidden_size)},
      {"attention heads",
       DescribeHeads(config.num_attention_heads, config.num_key_value_heads, config.head_dim)},
      {"vocab size", absl::StrCat(config.vocab_size)},
      {"drafter", absl::StrCat("DFlash, block size ", config.block_size, ", taps target layers ",
                               absl::StrJoin(config.target_layer_ids, ", "), " of ",
                               config.num_target_layers, ", mask token ", config.mask_token_id)}};
}

}  // namespace

absl::StatusOr<CheckpointSummary> SummarizeCheckpoint(const std::filesystem::path& dir) {
  const std::filesystem::path config_path = dir / "config.json";
  absl::StatusOr<json> config = ReadJsonFile(config_path);
  if (!config.ok()) return config.status();
  absl::StatusOr<std::variant<Qwen35TextConfig, DFlashDraftConfig>> model =
      ParseModelConfig(*config, config_path.string());
  if (!model.ok()) return model.status();
  absl::StatusOr<std::optional<QuantizationConfig>> quantization =
      ParseQuantizationConfig(*config, config_path.string());
  if (!quantization.ok()) return quantization.status();
  absl::StatusOr<Checkpoint> checkpoint = Checkpoint::Open(dir);
  if (!checkpoint.ok()) return checkpoint.status();

  CheckpointSummary summary;
  summary.model = *std::move(model);
  summary.quantization = *std::move(quantization);
  summary.shard_count = static_cast<int64_t>(checkpoint->shard_paths().size());
  for (const TensorView& tensor : checkpoint->tensors()) {
    const auto bytes = static_cast<int64_t>(tensor.bytes.size());
    DTypeUsage& usage = summary.usage_by_dtype[tensor.dtype];
    ++usage.tensor_count;
    usage.bytes += bytes;
    ++summary.tensor_count;
    summary.total_bytes += bytes;
  }
  return summary;
}

json SummaryToJson(const CheckpointSummary& summary) {
  json result = std::visit([](const auto& model) { return ModelToJson(model); }, summary.model);
  json by_dtype = json::object();
  for (const auto& [dtype, usage] : summary.usage_by_dtype) {
    by_dtype[std::string(DTypeName(dtype))] = {{"tensor_count", usage.tensor_count},
                                               {"bytes", usage.bytes}};
  }
  result["tensors"] = {{"tensor_count", summary.tensor_count},
                       {"total_bytes", summary.total_bytes},
                       {"shard_count", summary.shard_count},
                       {"by_dtype", by_dtype}};
  result["quantization"] = QuantizationToJson(summary.quantization);
  return result;
}

std::string SummaryToText(const CheckpointSummary& summary) {
  Lines lines = std::visit([](const auto& model) { return ModelLines(model); }, summary.model);
  lines.emplace_back("tensors", absl::StrCat(summary.tensor_count, " in ", summary.shard_count,
                                             summary.shard_count == 1 ? " shard, " : " shards, ",
                                             DescribeBytes(summary.total_bytes)));
  for (const auto& [dtype, usage] : summary.usage_by_dtype) {
    lines.emplace_back(absl::StrCat("  ", DTypeName(dtype)),
                       absl::StrCat(usage.tensor_count, " tensors, ", DescribeBytes(usage.bytes)));
  }
  lines.emplace_back("quantization", DescribeQuantization(summary.quantization));

  size_t label_width = 0;
  for (const auto& [label, value] : lines) label_width = std::max(label_width, label.size());
  std::string text;
  for (const auto& [label, value] : lines) {
    absl::StrAppend(&text, label, std::string(label_width + 2 - label.size(), ' '), value, "\n");
  }
  return text;
}

}  // namespace specd::io
