#pragma once
// A DFlash block-diffusion drafter's hyperparameters from its config.json (z-lab
// DFlashDraftModel layout): Qwen3 decoder layers plus the DFlash fields that tie it to a target.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace specd::io {

struct DFlashDraftConfig {
  std::string architecture;  // architectures[0], "DFlashDraftModel"

  int64_t block_size = 0;  // tokens per drafted block: the anchor plus block_size - 1 masks
  int64_t mask_token_id = 0;
  int64_t num_target_layers = 0;
  // Target decoder layers whose outputs, concatenated in this order, feed the drafter's `fc`.
  std::vector<int64_t> target_layer_ids;

  // The Qwen3 decoder stack (model_type "qwen3").
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  double rms_norm_eps = 0;
  double rope_theta = 0;
  int64_t max_position_embeddings = 0;
  // The symmetric attention window (model::DraftOptions::window) the drafter was trained for and
  // drafts with unless a request names another: `sliding_window` when `use_sliding_window` is
  // true. A drafter trained on sequences of N tokens has seen no key farther than N from a
  // query; its window keeps longer contexts in that range. 0: none.
  int64_t sliding_window = 0;
  // A pruned head (EAGLE-3's `draft_vocab_size`): the drafter proposes only these many tokens, the
  // most frequent of its training data, which its checkpoint's `d2t` names. 0: the whole
  // vocabulary.
  int64_t draft_vocab_size = 0;
  std::string torch_dtype;  // e.g. "bfloat16"; "" when the config names none
};

// `source` names the file in error messages, which also name the offending field.
absl::StatusOr<DFlashDraftConfig> ParseDFlashDraftConfig(const nlohmann::json& config,
                                                         const std::string& source);

}  // namespace specd::io
