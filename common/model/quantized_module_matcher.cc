#include "common/model/quantized_module_matcher.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace specd::model {
namespace {

constexpr std::string_view kRegexPrefix = "re:";
constexpr std::string_view kLinearClass = "Linear";  // every module this model quantizes is one

}  // namespace

bool QuantizedModuleMatcher::Matcher::Matches(const std::string& module_name) const {
  if (prefix.has_value()) {
    // Python's re.match: the match starts at the beginning but need not reach the end.
    return std::regex_search(module_name, *prefix, std::regex_constants::match_continuous);
  }
  return text == kLinearClass || text == module_name;
}

absl::StatusOr<QuantizedModuleMatcher::Matcher> QuantizedModuleMatcher::MakeMatcher(
    const std::string& entry) {
  Matcher matcher{.text = entry, .prefix = std::nullopt};
  if (std::string_view(entry).starts_with(kRegexPrefix)) {
    try {
      matcher.prefix.emplace(entry.substr(kRegexPrefix.size()), std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return absl::InvalidArgumentError(
          absl::StrCat("quantization_config: bad pattern \"", entry, "\": ", e.what()));
    }
  }
  return matcher;
}

absl::StatusOr<QuantizedModuleMatcher> QuantizedModuleMatcher::FromConfig(
    const std::optional<io::QuantizationConfig>& quantization) {
  if (!quantization.has_value()) return QuantizedModuleMatcher();
  const io::QuantizationConfig& config = *quantization;
  if (config.format != "pack-quantized") {
    return absl::UnimplementedError(absl::StrCat("quantization_config: format \"", config.format,
                                                 "\" is not supported (only pack-quantized)"));
  }
  QuantizedModuleMatcher linears;
  for (const io::QuantizationGroup& group : config.groups) {
    if (!group.weights.has_value()) continue;
    const io::QuantizationArgs& weights = *group.weights;
    if (weights.num_bits != 4 || weights.type != "int" || group.input_activations.has_value()) {
      return absl::UnimplementedError(absl::StrCat("quantization_config: group ", group.name,
                                                   " is ", io::QuantizationSchemeName(group),
                                                   "; only INT4 W4A16 is supported"));
    }
    for (const std::string& target : group.targets) {
      absl::StatusOr<Matcher> matcher = MakeMatcher(target);
      if (!matcher.ok()) return matcher.status();
      linears.targets_.push_back(*std::move(matcher));
    }
  }
  for (const std::string& entry : config.ignore) {
    absl::StatusOr<Matcher> matcher = MakeMatcher(entry);
    if (!matcher.ok()) return matcher.status();
    linears.ignore_.push_back(*std::move(matcher));
  }
  return linears;
}

bool QuantizedModuleMatcher::Contains(std::string_view module_name) const {
  const std::string name(module_name);
  auto matches = [&](const Matcher& matcher) { return matcher.Matches(name); };
  return std::any_of(targets_.begin(), targets_.end(), matches) &&
         std::none_of(ignore_.begin(), ignore_.end(), matches);
}

}  // namespace specd::model
