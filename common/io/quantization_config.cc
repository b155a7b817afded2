#include "common/io/quantization_config.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/io/json_field_reader.h"

namespace specd::io {
namespace {

std::optional<QuantizationArgs> ReadArgs(JsonFieldReader& group, std::string_view key) {
  if (!group.Has(key)) return std::nullopt;
  JsonFieldReader fields = group.Object(key);
  QuantizationArgs args;
  args.num_bits = fields.PositiveInt("num_bits");
  args.type = fields.String("type");
  args.symmetric = fields.BoolOr("symmetric", true);
  args.strategy = fields.String("strategy");
  if (fields.Has("group_size")) args.group_size = fields.Int("group_size");
  // Older configs write actorder as a bool; compressed-tensors reads true as "group".
  const nlohmann::json* actorder = fields.Find("actorder");
  if (actorder != nullptr && actorder->is_boolean()) {
    if (actorder->get<bool>()) args.actorder = "group";
  } else if (fields.Has("actorder")) {
    args.actorder = fields.String("actorder");
  }
  return args;
}

}  // namespace

std::string QuantizationSchemeName(const QuantizationGroup& group) {
  const int64_t weight_bits = group.weights ? group.weights->num_bits : 16;
  const int64_t activation_bits = group.input_activations ? group.input_activations->num_bits : 16;
  return absl::StrCat("W", weight_bits, "A", activation_bits);
}

absl::StatusOr<std::optional<QuantizationConfig>> ParseQuantizationConfig(
    const nlohmann::json& config, const std::string& source) {
  JsonFieldReader root(config, source);
  if (!root.status().ok()) return root.status();
  if (!root.Has("quantization_config")) return std::optional<QuantizationConfig>();
  JsonFieldReader block = root.Object("quantization_config");
  QuantizationConfig parsed;
  parsed.quant_method = block.String("quant_method");
  if (block.status().ok() && parsed.quant_method != "compressed-tensors") {
    return absl::UnimplementedError(
        absl::StrCat(source, ": quantization_config.quant_method: \"", parsed.quant_method,
                     "\" is not supported (only \"compressed-tensors\" is)"));
  }
  parsed.format = block.StringOr("format", "");
  parsed.ignore = block.OptionalStringList("ignore").value_or(std::vector<std::string>{});

  JsonFieldReader groups = block.Object("config_groups");
  if (const nlohmann::json* group_objects = block.Find("config_groups");
      group_objects != nullptr && group_objects->is_object()) {
    for (const auto& item : group_objects->items()) {
      JsonFieldReader fields = groups.Object(item.key());
      QuantizationGroup group;
      group.name = item.key();
      group.targets = fields.StringList("targets");
      group.weights = ReadArgs(fields, "weights");
      group.input_activations = ReadArgs(fields, "input_activations");
      parsed.groups.push_back(std::move(group));
    }
  }
  if (!root.status().ok()) return root.status();
  return parsed;
}

}  // namespace specd::io
