#pragma once
// What `specd inspect` reports about a checkpoint directory: the model its config.json describes,
// its quantization, and what its safetensors hold.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <variant>

#include "absl/status/statusor.h"
#include "common/io/dflash_config.h"
#include "common/io/dtype.h"
#include "common/io/quantization_config.h"
#include "common/io/qwen35_config.h"
#include "nlohmann/json.hpp"

namespace specd::io {

struct DTypeUsage {
  int64_t tensor_count = 0;
  int64_t bytes = 0;
};

struct CheckpointSummary {
  std::variant<Qwen35TextConfig, DFlashDraftConfig> model;
  std::optional<QuantizationConfig> quantization;  // nullopt: not quantized
  int64_t tensor_count = 0;
  int64_t total_bytes = 0;  // of tensor data, headers excluded
  int64_t shard_count = 0;
  std::map<DType, DTypeUsage> usage_by_dtype;
};

// Reads `dir`/config.json (a Qwen3.5 target, or a DFlash drafter when it has `dflash_config`)
// and maps the checkpoint's safetensors, validating both.
absl::StatusOr<CheckpointSummary> SummarizeCheckpoint(const std::filesystem::path& dir);

// A JSON object for machines: the same facts as SummaryToText, with exact numbers.
nlohmann::json SummaryToJson(const CheckpointSummary& summary);

// Aligned "label  value" lines for people.
std::string SummaryToText(const CheckpointSummary& summary);

}  // namespace specd::io
