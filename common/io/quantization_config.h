#pragma once
// A summary of the compressed-tensors `quantization_config` block of a config.json, as
// llm-compressor writes it: which modules are quantized and how. The codec reads it later.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace specd::io {

// How one kind of tensor (weights or input activations) is quantized.
struct QuantizationArgs {
  int64_t num_bits = 0;
  std::string type;                     // "int" or "float"
  bool symmetric = true;                // false: a zero point is stored
  std::string strategy;                 // "group", "channel", "tensor", ...
  std::optional<int64_t> group_size;    // for strategy "group"
  std::optional<std::string> actorder;  // GPTQ activation ordering: "group", "weight", ...
};

// A config group: the modules its targets match share one scheme.
struct QuantizationGroup {
  std::string name;                  // e.g. "group_0"
  std::vector<std::string> targets;  // module class names or "re:"-prefixed regexes
  std::optional<QuantizationArgs> weights;
  std::optional<QuantizationArgs> input_activations;  // absent: activations stay 16-bit
};

struct QuantizationConfig {
  std::string quant_method;  // "compressed-tensors"
  std::string format;        // e.g. "pack-quantized"
  std::vector<QuantizationGroup> groups;
  std::vector<std::string> ignore;  // module names or "re:"-prefixed regexes left unquantized
};

// The preset-style name of a group's scheme, e.g. "W4A16" (weight bits, activation bits).
std::string QuantizationSchemeName(const QuantizationGroup& group);

// The `quantization_config` of a whole config.json, or nullopt when it has none. Quantization
// methods other than compressed-tensors are refused as unsupported.
absl::StatusOr<std::optional<QuantizationConfig>> ParseQuantizationConfig(
    const nlohmann::json& config, const std::string& source);

}  // namespace specd::io
