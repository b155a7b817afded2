#pragma once
// Named Qwen3.5 text shapes for random-weight checkpoints: the real Qwen3.5-4B, and scaled-down
// models with the same layer pattern and head sizes that a small machine can run, sized to be
// several times larger than a CPU's last-level cache so that decoding streams weights from DRAM.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/io/qwen35_config.h"

namespace specd::model {

// "qwen35-4b", "qwen35-0.8b", "qwen35-0.2b".
std::vector<std::string> Qwen35PresetNames();

absl::StatusOr<io::Qwen35TextConfig> Qwen35Preset(std::string_view name);

// Weights of the text model, the embedding and (when untied) the LM head included.
int64_t Qwen35ParameterCount(const io::Qwen35TextConfig& config);

// Weights one decode step reads: every layer, one embedding row and the whole LM head (the
// embedding again when tied).
int64_t Qwen35DecodeStepParameterCount(const io::Qwen35TextConfig& config);

}  // namespace specd::model
