#pragma once
// What a Qwen3.5 checkpoint directory's config.json says: the text model's shape and, for a
// compressed-tensors checkpoint, how its Linears are quantized.
#include <filesystem>
#include <optional>

#include "absl/status/statusor.h"
#include "common/io/quantization_config.h"
#include "common/io/qwen35_config.h"

namespace specd::io {

struct Qwen35CheckpointConfig {
  Qwen35TextConfig text;
  std::optional<QuantizationConfig> quantization;  // none: every Linear is dense
};

// Reads `dir`/config.json; errors name the file.
absl::StatusOr<Qwen35CheckpointConfig> ReadQwen35CheckpointConfig(const std::filesystem::path& dir);

}  // namespace specd::io
