#pragma once
// Which Linear modules a compressed-tensors `quantization_config` stores as W4A16
// pack-quantized, by module name (the tensor name without ".weight"). compressed-tensors matches
// a target or ignore entry against a module by class name ("Linear"), by exact name, or, for a
// "re:" entry, with Python's re.match (anchored at the start of the name only).
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/io/quantization_config.h"

namespace specd::model {

class QuantizedModuleMatcher {
 public:
  QuantizedModuleMatcher() = default;  // nothing quantized: every Linear is dense

  // A checkpoint's `quantization_config` (none: nothing quantized). Refuses formats and schemes
  // other than pack-quantized INT4 weights with 16-bit activations, and malformed "re:" patterns.
  static absl::StatusOr<QuantizedModuleMatcher> FromConfig(
      const std::optional<io::QuantizationConfig>& quantization);

  // Whether the Linear `module_name` (e.g. "model.layers.0.mlp.up_proj") is stored quantized.
  bool Contains(std::string_view module_name) const;
  bool empty() const { return targets_.empty(); }

 private:
  struct Matcher {
    std::string text;                  // the entry as written
    std::optional<std::regex> prefix;  // "re:" entries
    bool Matches(const std::string& module_name) const;
  };
  static absl::StatusOr<Matcher> MakeMatcher(const std::string& entry);

  std::vector<Matcher> targets_;
  std::vector<Matcher> ignore_;
};

}  // namespace specd::model
