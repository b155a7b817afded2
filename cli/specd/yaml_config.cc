#include "cli/specd/yaml_config.h"

#include <vector>

#include "absl/strings/str_join.h"

namespace specd::cli {

absl::StatusOr<YamlConfig> YamlConfig::Load(const std::filesystem::path& file) {
  try {
    YAML::Node root = YAML::LoadFile(file.string());
    if (!root.IsMap() && !root.IsNull()) {
      return absl::InvalidArgumentError(absl::StrCat(file.string(), " is not a YAML mapping"));
    }
    return YamlConfig(root, file.parent_path(), file.string());
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(file.string(), ": ", e.what()));
  }
}

absl::StatusOr<YamlConfig> YamlConfig::Parse(const std::string& text, std::filesystem::path base) {
  try {
    YAML::Node root = YAML::Load(text);
    if (!root.IsMap() && !root.IsNull()) {
      return absl::InvalidArgumentError("the config is not a YAML mapping");
    }
    return YamlConfig(root, std::move(base), "config");
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("config: ", e.what()));
  }
}

void YamlConfig::Read(const std::string& key, std::filesystem::path& field) {
  std::string text;
  Read(key, text);
  if (read_.contains(key) && !text.empty()) {
    const std::filesystem::path path(text);
    field = path.is_absolute() ? path : base_ / path;
    if (roots_.has_value() && error_.ok()) error_ = roots_->Check(field, source_ + ": " + key);
  }
}

absl::Status YamlConfig::Finish() const {
  if (!error_.ok()) return error_;
  std::vector<std::string> unknown;
  if (root_.IsMap()) {
    for (const auto& entry : root_) {
      const std::string key = entry.first.as<std::string>();
      if (!read_.contains(key)) unknown.push_back(key);
    }
  }
  if (!unknown.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": unknown keys: ", absl::StrJoin(unknown, ", ")));
  }
  return absl::OkStatus();
}

std::string YamlConfig::Dump(const YAML::Node& node) {
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

}  // namespace specd::cli
