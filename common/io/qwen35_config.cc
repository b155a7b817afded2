#include "common/io/qwen35_config.h"

#include "absl/strings/str_cat.h"
#include "common/io/hf_config_fields.h"
#include "common/io/json_field_reader.h"

namespace specd::io {
namespace {

constexpr char kTextModelType[] = "qwen3_5_text";
constexpr char kWrapperModelType[] = "qwen3_5";
constexpr char kWrapperArchitecture[] = "Qwen3_5ForConditionalGeneration";

std::vector<LayerType> ReadLayerTypes(JsonFieldReader& text, int64_t num_layers) {
  std::vector<LayerType> layer_types;
  if (!text.Has("layer_types")) {
    const int64_t interval = text.IntOr("full_attention_interval", 4);
    if (interval <= 0) {
      text.Fail("full_attention_interval",
                absl::StrCat("expected a positive integer, got ", interval));
      return layer_types;
    }
    for (int64_t i = 0; i < num_layers; ++i) {
      layer_types.push_back((i + 1) % interval == 0 ? LayerType::kFullAttention
                                                    : LayerType::kLinearAttention);
    }
    return layer_types;
  }
  for (const std::string& name : text.StringList("layer_types")) {
    if (name == LayerTypeName(LayerType::kLinearAttention)) {
      layer_types.push_back(LayerType::kLinearAttention);
    } else if (name == LayerTypeName(LayerType::kFullAttention)) {
      layer_types.push_back(LayerType::kFullAttention);
    } else {
      text.Fail("layer_types", absl::StrCat("unknown layer type \"", name, "\""));
      return layer_types;
    }
  }
  if (static_cast<int64_t>(layer_types.size()) != num_layers) {
    text.Fail("layer_types", absl::StrCat("lists ", layer_types.size(), " layers but ",
                                          "num_hidden_layers is ", num_layers));
  }
  return layer_types;
}

}  // namespace

const char* LayerTypeName(LayerType type) {
  switch (type) {
    case LayerType::kLinearAttention:
      return "linear_attention";
    case LayerType::kFullAttention:
      return "full_attention";
  }
  return "?";  // unreachable: the switch covers every enumerator
}

absl::StatusOr<Qwen35TextConfig> ParseQwen35TextConfig(const nlohmann::json& config,
                                                       const std::string& source) {
  JsonFieldReader root(config, source);
  Qwen35TextConfig parsed;
  parsed.architecture = ReadArchitecture(root);
  parsed.model_type = root.String("model_type");
  if (!root.status().ok()) return root.status();
  const bool is_wrapper = parsed.model_type == kWrapperModelType;
  if (!is_wrapper && parsed.model_type != kTextModelType) {
    root.Fail("model_type", absl::StrCat("expected \"", kTextModelType, "\" or \"",
                                         kWrapperModelType, "\", got \"", parsed.model_type, "\""));
    return root.status();
  }
  parsed.tensor_prefix = is_wrapper || parsed.architecture == kWrapperArchitecture
                             ? "model.language_model."
                             : "model.";

  JsonFieldReader text = is_wrapper ? root.Object("text_config") : root;
  parsed.vocab_size = text.PositiveInt("vocab_size");
  parsed.hidden_size = text.PositiveInt("hidden_size");
  parsed.intermediate_size = text.PositiveInt("intermediate_size");
  parsed.num_hidden_layers = text.PositiveInt("num_hidden_layers");
  parsed.num_attention_heads = text.PositiveInt("num_attention_heads");
  parsed.num_key_value_heads = text.PositiveInt("num_key_value_heads");
  parsed.head_dim = text.PositiveInt("head_dim");
  parsed.linear_num_key_heads = text.PositiveInt("linear_num_key_heads");
  parsed.linear_num_value_heads = text.PositiveInt("linear_num_value_heads");
  parsed.linear_key_head_dim = text.PositiveInt("linear_key_head_dim");
  parsed.linear_value_head_dim = text.PositiveInt("linear_value_head_dim");
  parsed.linear_conv_kernel_dim = text.PositiveInt("linear_conv_kernel_dim");
  parsed.max_position_embeddings = text.PositiveInt("max_position_embeddings");
  parsed.rms_norm_eps = text.NumberOr("rms_norm_eps", 1e-6);
  if (!text.status().ok()) return text.status();  // layer types need a valid layer count
  parsed.layer_types = ReadLayerTypes(text, parsed.num_hidden_layers);

  parsed.rope_theta = ReadRopeTheta(text);
  const double top_level_rotary_factor = text.NumberOr("partial_rotary_factor", 0.25);
  parsed.partial_rotary_factor =
      text.Has("rope_parameters") ? text.Object("rope_parameters")
                                        .NumberOr("partial_rotary_factor", top_level_rotary_factor)
                                  : top_level_rotary_factor;

  // The wrapper may keep these at its top level instead; the text config wins when both do.
  parsed.tie_word_embeddings =
      text.BoolOr("tie_word_embeddings", root.BoolOr("tie_word_embeddings", false));
  parsed.eos_token_ids = text.Has("eos_token_id") ? text.IntOrIntList("eos_token_id")
                                                  : root.IntOrIntList("eos_token_id");
  parsed.torch_dtype = ReadTorchDType(text);
  if (parsed.torch_dtype.empty()) parsed.torch_dtype = ReadTorchDType(root);

  if (!root.status().ok()) return root.status();
  return parsed;
}

}  // namespace specd::io
