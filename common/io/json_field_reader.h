#pragma once
// Typed reads of the fields of one JSON object (a config.json or a block inside it). The first
// missing or mistyped field is remembered with the file and the field's path, e.g.
// ".../config.json: text_config.hidden_size: expected an integer, got \"64\"", and later reads
// return placeholders, so a parser reads all its fields and checks status() once at the end.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace specd::io {

class JsonFieldReader {
 public:
  // `object` must outlive the reader; `source` names the file in error messages.
  JsonFieldReader(const nlohmann::json& object, std::string source);

  // Whether the field is present with a value other than null.
  bool Has(std::string_view key) const;

  // Required fields: absent or null is an error. Integers refuse fractional numbers.
  int64_t Int(std::string_view key);
  int64_t PositiveInt(std::string_view key);
  double Number(std::string_view key);
  std::string String(std::string_view key);
  std::vector<int64_t> IntList(std::string_view key);
  std::vector<std::string> StringList(std::string_view key);

  // Optional fields: absent or null gives the fallback.
  int64_t IntOr(std::string_view key, int64_t fallback);
  double NumberOr(std::string_view key, double fallback);
  bool BoolOr(std::string_view key, bool fallback);
  std::string StringOr(std::string_view key, std::string_view fallback);
  std::optional<std::vector<std::string>> OptionalStringList(std::string_view key);
  // A single integer or a list of them, as HF writes eos_token_id; absent or null gives {}.
  std::vector<int64_t> IntOrIntList(std::string_view key);

  // A nested object, read with this reader's file and the field path as prefix. An absent or
  // mistyped field records an error and gives a reader of an empty object.
  JsonFieldReader Object(std::string_view key);

  // The raw value, for fields with an unusual shape; nullptr when absent.
  const nlohmann::json* Find(std::string_view key) const;

  // Records an error about `key` that only the caller can detect (e.g. a value out of range).
  void Fail(std::string_view key, std::string_view problem);

  // The first error, or OK.
  const absl::Status& status() const { return *status_; }

 private:
  JsonFieldReader(const nlohmann::json& object, std::string source, std::string path_prefix,
                  std::shared_ptr<absl::Status> status);

  // Converts a present, non-null field with `convert` (nullopt: wrong type, recorded as expecting
  // `expected`); an absent or null one gives `fallback`, after recording "missing" if required.
  template <typename T, typename Convert>
  T Read(std::string_view key, bool required, T fallback, std::string_view expected,
         Convert convert);
  void FailType(std::string_view key, std::string_view expected, const nlohmann::json& value);

  const nlohmann::json* object_;
  std::string source_;
  std::string path_prefix_;               // "text_config." for a nested reader
  std::shared_ptr<absl::Status> status_;  // shared with nested readers: one first error per file
};

}  // namespace specd::io
