#include "common/io/qwen35_checkpoint_config.h"

#include "common/io/json_file.h"

namespace specd::io {

absl::StatusOr<Qwen35CheckpointConfig> ReadQwen35CheckpointConfig(
    const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "config.json";
  absl::StatusOr<nlohmann::json> json = ReadJsonFile(path);
  if (!json.ok()) return json.status();
  absl::StatusOr<Qwen35TextConfig> text = ParseQwen35TextConfig(*json, path.string());
  if (!text.ok()) return text.status();
  absl::StatusOr<std::optional<QuantizationConfig>> quantization =
      ParseQuantizationConfig(*json, path.string());
  if (!quantization.ok()) return quantization.status();
  return Qwen35CheckpointConfig{.text = *std::move(text), .quantization = *std::move(quantization)};
}

}  // namespace specd::io
