#pragma once
// The Qwen3.5 text model's hyperparameters from a Hugging Face config.json: either a text model
// (model_type "qwen3_5_text", Qwen3_5ForCausalLM) or the multimodal wrapper (model_type "qwen3_5",
// Qwen3_5ForConditionalGeneration) whose text fields sit under "text_config".
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace specd::io {

enum class LayerType { kLinearAttention, kFullAttention };  // Gated DeltaNet / gated attention

// The config.json spelling: "linear_attention", "full_attention".
const char* LayerTypeName(LayerType type);

struct Qwen35TextConfig {
  std::string architecture;  // architectures[0]
  std::string model_type;    // of the file's top level
  // Prefix of the text model's tensor names: "model." for Qwen3_5ForCausalLM,
  // "model.language_model." for Qwen3_5ForConditionalGeneration.
  std::string tensor_prefix;

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // of every layer's SwiGLU MLP
  int64_t num_hidden_layers = 0;
  // One per layer. When the config has no list, built as transformers does: layer i is full
  // attention when (i + 1) is a multiple of full_attention_interval (default 4).
  std::vector<LayerType> layer_types;

  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;

  int64_t linear_num_key_heads = 0;
  int64_t linear_num_value_heads = 0;
  int64_t linear_key_head_dim = 0;
  int64_t linear_value_head_dim = 0;
  int64_t linear_conv_kernel_dim = 0;

  double rms_norm_eps = 0;
  double rope_theta = 0;
  double partial_rotary_factor = 0;  // share of head_dim that RoPE rotates
  int64_t max_position_embeddings = 0;

  bool tie_word_embeddings = false;  // lm_head reuses embed_tokens
  std::vector<int64_t> eos_token_ids;
  std::string torch_dtype;  // e.g. "bfloat16"; "" when the config names none
};

// `source` names the file in error messages, which also name the offending field.
absl::StatusOr<Qwen35TextConfig> ParseQwen35TextConfig(const nlohmann::json& config,
                                                       const std::string& source);

}  // namespace specd::io
