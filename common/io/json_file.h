#pragma once
// Reads a JSON file (config.json, model.safetensors.index.json) into memory.
#include <filesystem>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace specd::io {

// Fails with the path in the message if the file cannot be read or is not valid JSON.
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::filesystem::path& path);

}  // namespace specd::io
