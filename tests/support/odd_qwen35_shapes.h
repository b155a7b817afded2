#pragma once
// A small Qwen3.5 text config in which every size that can differ does: GQA (6 query heads on
// 2 key/value heads), more DeltaNet value heads than key heads, key and value head dims that
// differ, partial RoPE, an untied head, two layers of each type in an uneven pattern. Loaders
// and writers tested on it cannot be relying on the fixture's coincidences.
#include "common/io/qwen35_config.h"

namespace specd::testing {

inline io::Qwen35TextConfig OddQwen35Shapes() {
  using io::LayerType;
  io::Qwen35TextConfig config;
  config.vocab_size = 97;
  config.hidden_size = 48;
  config.intermediate_size = 80;
  config.num_hidden_layers = 5;
  config.layer_types = {LayerType::kLinearAttention, LayerType::kFullAttention,
                        LayerType::kLinearAttention, LayerType::kLinearAttention,
                        LayerType::kFullAttention};
  config.num_attention_heads = 6;
  config.num_key_value_heads = 2;
  config.head_dim = 16;
  config.linear_num_key_heads = 2;
  config.linear_num_value_heads = 6;
  config.linear_key_head_dim = 12;
  config.linear_value_head_dim = 8;
  config.linear_conv_kernel_dim = 4;
  config.rms_norm_eps = 1e-6;
  config.rope_theta = 10000.0;
  config.partial_rotary_factor = 0.5;
  config.max_position_embeddings = 1024;
  config.tie_word_embeddings = false;
  config.eos_token_ids = {1};
  return config;
}

}  // namespace specd::testing
