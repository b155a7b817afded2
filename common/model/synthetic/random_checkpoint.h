#pragma once
// Writes a Qwen3.5 text checkpoint with random weights for any config: tests use it to cover
// shapes the fixtures do not, and benchmarks to build models of any size. The values follow the
// reference fixtures (non-trivial norms, decays and conv taps) so that a wrong formula shows.
#include <cstdint>
#include <filesystem>
#include <limits>

#include "absl/status/status.h"
#include "common/io/dtype.h"
#include "common/io/qwen35_config.h"
#include "nlohmann/json.hpp"

namespace specd::model {

enum class CheckpointLayout {
  kCausalLm,              // Qwen3_5ForCausalLM: "model." names
  kConditionalGeneration  // Qwen3_5ForConditionalGeneration: "model.language_model." names,
                          // plus vision and MTP tensors that a text model must skip
};

struct RandomCheckpointOptions {
  CheckpointLayout layout = CheckpointLayout::kCausalLm;
  uint64_t seed = 0;  // the same seed gives the same weights in either layout
  uint64_t max_shard_bytes = std::numeric_limits<uint64_t>::max();
  io::DType dtype =
      io::DType::kF32;  // kF32 or kBF16 (A_log stays float32, as released models keep it)
  // A compressed-tensors pack-quantized `quantization_config` block (quant::
  // CompressedTensorsConfig): the Linears it covers are written as their RTN-quantized INT4
  // (scales in `dtype`), never dense, and the block goes into config.json. Null: all dense.
  nlohmann::json quantization_config = nullptr;
  // The values training from scratch starts from (transformers' initialisation), instead of
  // the fixture-like ones that make a wrong formula show.
  bool training_start = false;
};

// Writes config.json and the safetensors into `dir`, which must exist. Only the fields
// of `config` that describe the architecture are used.
absl::Status WriteRandomQwen35Checkpoint(const std::filesystem::path& dir,
                                         const io::Qwen35TextConfig& config,
                                         const RandomCheckpointOptions& options);

}  // namespace specd::model
