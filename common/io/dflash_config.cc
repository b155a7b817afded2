#include "common/io/dflash_config.h"

#include "absl/strings/str_cat.h"
#include "common/io/hf_config_fields.h"
#include "common/io/json_field_reader.h"

namespace specd::io {

absl::StatusOr<DFlashDraftConfig> ParseDFlashDraftConfig(const nlohmann::json& config,
                                                         const std::string& source) {
  JsonFieldReader root(config, source);
  const std::string model_type = root.String("model_type");
  if (root.status().ok() && model_type != "qwen3") {
    root.Fail("model_type",
              absl::StrCat("expected \"qwen3\" for a DFlash drafter, got \"", model_type, "\""));
  }
  DFlashDraftConfig parsed;
  parsed.architecture = ReadArchitecture(root);
  parsed.block_size = root.PositiveInt("block_size");
  parsed.num_target_layers = root.PositiveInt("num_target_layers");
  JsonFieldReader dflash = root.Object("dflash_config");
  parsed.mask_token_id = dflash.Int("mask_token_id");
  parsed.target_layer_ids = dflash.IntList("target_layer_ids");

  parsed.vocab_size = root.PositiveInt("vocab_size");
  parsed.hidden_size = root.PositiveInt("hidden_size");
  parsed.intermediate_size = root.PositiveInt("intermediate_size");
  parsed.num_hidden_layers = root.PositiveInt("num_hidden_layers");
  parsed.num_attention_heads = root.PositiveInt("num_attention_heads");
  parsed.num_key_value_heads = root.PositiveInt("num_key_value_heads");
  // Qwen3Config's default when the config leaves it out.
  parsed.head_dim = root.IntOr("head_dim", parsed.hidden_size / parsed.num_attention_heads);
  parsed.rms_norm_eps = root.NumberOr("rms_norm_eps", 1e-6);
  parsed.rope_theta = ReadRopeTheta(root);
  parsed.max_position_embeddings = root.PositiveInt("max_position_embeddings");
  if (root.BoolOr("use_sliding_window", false)) {
    parsed.sliding_window = root.PositiveInt("sliding_window");
  }
  parsed.draft_vocab_size = root.IntOr("draft_vocab_size", 0);
  parsed.torch_dtype = ReadTorchDType(root);
  if (!root.status().ok()) return root.status();
  if (parsed.draft_vocab_size < 0 || parsed.draft_vocab_size > parsed.vocab_size) {
    root.Fail("draft_vocab_size", absl::StrCat(parsed.draft_vocab_size, " is outside [0, ",
                                               parsed.vocab_size, "] (the vocabulary)"));
  }

  if (parsed.target_layer_ids.empty()) {
    dflash.Fail("target_layer_ids", "is empty");
  }
  for (int64_t layer : parsed.target_layer_ids) {
    if (layer < 0 || layer >= parsed.num_target_layers) {
      dflash.Fail("target_layer_ids", absl::StrCat("layer ", layer, " is not one of the target's ",
                                                   parsed.num_target_layers, " layers"));
    }
  }
  if (parsed.mask_token_id < 0 || parsed.mask_token_id >= parsed.vocab_size) {
    dflash.Fail("mask_token_id", absl::StrCat(parsed.mask_token_id,
                                              " is outside the vocabulary of ", parsed.vocab_size));
  }
  if (!root.status().ok()) return root.status();
  return parsed;
}

}  // namespace specd::io
