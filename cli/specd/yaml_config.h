#pragma once
// A training stage's YAML config, read key by key into the stage's options: a key that is
// absent keeps the option's default (the paper's value), a value of the wrong type is an error,
// and so is a key nothing read (a typo must not silently train with a default), and, when the
// config is confined, a path outside the allowed roots.
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <optional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/io/allowed_roots.h"

namespace specd::cli {

class YamlConfig {
 public:
  static absl::StatusOr<YamlConfig> Load(const std::filesystem::path& file);
  static absl::StatusOr<YamlConfig> Parse(const std::string& text, std::filesystem::path base);

  // Relative paths resolve against `base` instead of the config file's directory (a config
  // checked before it is written where it will run).
  void ResolvePathsAgainst(std::filesystem::path base) { base_ = std::move(base); }
  // Every path read must lie under `roots`; one outside is a PERMISSION_DENIED error.
  void ConfinePathsTo(io::AllowedRoots roots) { roots_ = std::move(roots); }

  // Sets `field` from `key` if present. Paths are relative to the config file's directory.
  template <typename T>
  void Read(const std::string& key, T& field) {
    const YAML::Node node = root_[key];
    if (!node.IsDefined()) return;
    read_.insert(key);
    try {
      field = node.as<T>();
    } catch (const YAML::Exception&) {
      if (error_.ok()) {
        error_ = absl::InvalidArgumentError(
            absl::StrCat(source_, ": ", key, ": ", Dump(node), " is not a valid value"));
      }
    }
  }
  void Read(const std::string& key, std::filesystem::path& field);

  // The first bad value, or the keys nothing read.
  absl::Status Finish() const;

 private:
  YamlConfig(YAML::Node root, std::filesystem::path base, std::string source)
      : root_(std::move(root)), base_(std::move(base)), source_(std::move(source)) {}
  static std::string Dump(const YAML::Node& node);

  YAML::Node root_;
  std::filesystem::path base_;
  std::string source_;
  std::optional<io::AllowedRoots> roots_;
  std::set<std::string> read_;
  absl::Status error_;
};

}  // namespace specd::cli
