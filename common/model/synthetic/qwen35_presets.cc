#include "common/model/synthetic/qwen35_presets.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace specd::model {
namespace {

struct Shape {
  int64_t hidden_size;
  int64_t groups;  // of [DeltaNet, DeltaNet, DeltaNet, attention] layers
  int64_t attention_heads;
  int64_t key_value_heads;
  int64_t linear_key_heads;
  int64_t linear_value_heads;
  int64_t intermediate_size;
};

struct Preset {
  const char* name;
  Shape shape;
};

// qwen35-4b is research/qwen35.md §1.1; the others keep its head sizes (256 for attention, 128
// for DeltaNet), its vocabulary and its 3:1 layer pattern, and shrink width and depth.
constexpr Preset kPresets[] = {
    {"qwen35-4b", {2560, 8, 16, 4, 16, 32, 9216}},
    {"qwen35-0.8b", {1024, 6, 8, 2, 8, 16, 4608}},
    {"qwen35-0.2b", {512, 3, 4, 2, 4, 8, 2048}},
};

io::Qwen35TextConfig ConfigOf(const Shape& shape) {
  io::Qwen35TextConfig config;
  config.architecture = "Qwen3_5ForCausalLM";
  config.model_type = "qwen3_5_text";
  config.tensor_prefix = "model.";
  config.vocab_size = 248320;
  config.hidden_size = shape.hidden_size;
  config.intermediate_size = shape.intermediate_size;
  config.num_hidden_layers = 4 * shape.groups;
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    config.layer_types.push_back(i % 4 == 3 ? io::LayerType::kFullAttention
                                            : io::LayerType::kLinearAttention);
  }
  config.num_attention_heads = shape.attention_heads;
  config.num_key_value_heads = shape.key_value_heads;
  config.head_dim = 256;
  config.linear_num_key_heads = shape.linear_key_heads;
  config.linear_num_value_heads = shape.linear_value_heads;
  config.linear_key_head_dim = 128;
  config.linear_value_head_dim = 128;
  config.linear_conv_kernel_dim = 4;
  config.rms_norm_eps = 1e-6;
  config.rope_theta = 1e7;
  config.partial_rotary_factor = 0.25;
  config.max_position_embeddings = 262144;
  config.tie_word_embeddings = true;
  config.eos_token_ids = {248044};
  return config;
}

int64_t LayerParameterCount(const io::Qwen35TextConfig& c, io::LayerType type) {
  const int64_t h = c.hidden_size;
  const int64_t norms_and_mlp = 2 * h + 3 * c.intermediate_size * h;
  if (type == io::LayerType::kFullAttention) {
    const int64_t query_width = c.num_attention_heads * c.head_dim;
    const int64_t key_value_width = c.num_key_value_heads * c.head_dim;
    return norms_and_mlp + 2 * query_width * h  // q_proj holds query and gate
           + 2 * key_value_width * h + query_width * h + 2 * c.head_dim;
  }
  const int64_t key_width = c.linear_num_key_heads * c.linear_key_head_dim;
  const int64_t value_width = c.linear_num_value_heads * c.linear_value_head_dim;
  const int64_t channels = 2 * key_width + value_width;
  const int64_t value_heads = c.linear_num_value_heads;
  return norms_and_mlp + channels * h + value_width * h + 2 * value_heads * h +
         channels * c.linear_conv_kernel_dim + 2 * value_heads + c.linear_value_head_dim +
         h * value_width;
}

int64_t LayersParameterCount(const io::Qwen35TextConfig& config) {
  int64_t count = config.hidden_size;  // the final norm
  for (const io::LayerType type : config.layer_types) count += LayerParameterCount(config, type);
  return count;
}

}  // namespace

std::vector<std::string> Qwen35PresetNames() {
  std::vector<std::string> names;
  for (const Preset& preset : kPresets) names.emplace_back(preset.name);
  return names;
}

absl::StatusOr<io::Qwen35TextConfig> Qwen35Preset(std::string_view name) {
  for (const Preset& preset : kPresets) {
    if (name == preset.name) return ConfigOf(preset.shape);
  }
  return absl::NotFoundError(absl::StrCat("no preset \"",
                                          absl::string_view(name.data(), name.size()),
                                          "\"; known: ", absl::StrJoin(Qwen35PresetNames(), ", ")));
}

int64_t Qwen35ParameterCount(const io::Qwen35TextConfig& config) {
  const int64_t embedding = config.vocab_size * config.hidden_size;
  return LayersParameterCount(config) + embedding * (config.tie_word_embeddings ? 1 : 2);
}

int64_t Qwen35DecodeStepParameterCount(const io::Qwen35TextConfig& config) {
  return LayersParameterCount(config) + config.hidden_size + config.vocab_size * config.hidden_size;
}

}  // namespace specd::model
