#pragma once
// Writes a DFlash drafter (z-lab DFlashDraftModel layout) with random weights, matched to a
// Qwen3.5 target: the speculative engine's tests use it to prove that any drafter leaves the
// output unchanged, and `specd drafter init` starts training from it.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "absl/status/status.h"
#include "common/io/dflash_config.h"
#include "common/io/qwen35_config.h"

namespace specd::model {

// build_target_layer_ids of the DFlash reference (research/dflash.md §2.2): the middle layer for
// one draft layer, else `num_draft_layers` ids spread evenly over [1, num_target_layers − 3],
// rounded as Python's round() does (half to even).
std::vector<int64_t> DFlashTargetLayerIds(int64_t num_target_layers, int64_t num_draft_layers);

struct RandomDrafterOptions {
  int64_t num_layers = 1;
  int64_t block_size = 16;
  uint64_t seed = 0;
  // -1: the target's last id. Qwen vocabularies are padded past the tokenizer's ids, so the
  // last one never stands for text and is free to mean MASK.
  int64_t mask_token_id = -1;
  int64_t window = 0;  // io::DFlashDraftConfig::sliding_window: the training sequence length
};

// The drafter config for `target`: its hidden size, attention shape (heads, KV heads, head_dim),
// MLP width, RoPE theta, context length and vocabulary; full-attention Qwen3 layers.
io::DFlashDraftConfig RandomDrafterConfig(const io::Qwen35TextConfig& target,
                                          const RandomDrafterOptions& options);

// Writes config.json and model.safetensors (float32) into `dir`, which must exist.
absl::Status WriteRandomDFlashDrafter(const std::filesystem::path& dir,
                                      const io::Qwen35TextConfig& target,
                                      const RandomDrafterOptions& options);

}  // namespace specd::model
