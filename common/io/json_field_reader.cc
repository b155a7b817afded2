#include "common/io/json_field_reader.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace specd::io {
namespace {

using nlohmann::json;

const json& EmptyObject() {
  static const json* const kEmpty = new json(json::object());
  return *kEmpty;
}

// A short rendering of a value for an error message.
std::string Describe(const json& value) {
  constexpr size_t kMaxChars = 40;
  std::string text = value.dump();
  if (text.size() > kMaxChars) text = absl::StrCat(text.substr(0, kMaxChars), "...");
  return text;
}

std::optional<int64_t> ToInt(const json& value) {
  if (!value.is_number_integer()) return std::nullopt;
  if (value.is_number_unsigned() && value.get<uint64_t>() > INT64_MAX) return std::nullopt;
  return value.get<int64_t>();
}

std::optional<double> ToNumber(const json& value) {
  if (!value.is_number()) return std::nullopt;
  return value.get<double>();
}

std::optional<bool> ToBool(const json& value) {
  if (!value.is_boolean()) return std::nullopt;
  return value.get<bool>();
}

std::optional<std::string> ToString(const json& value) {
  if (!value.is_string()) return std::nullopt;
  return value.get<std::string>();
}

template <typename T, typename Convert>
std::optional<std::vector<T>> ToList(const json& value, Convert convert) {
  if (!value.is_array()) return std::nullopt;
  std::vector<T> list;
  for (const json& element : value) {
    std::optional<T> converted = convert(element);
    if (!converted) return std::nullopt;
    list.push_back(*std::move(converted));
  }
  return list;
}

std::optional<std::vector<int64_t>> ToIntList(const json& value) {
  return ToList<int64_t>(value, ToInt);
}

std::optional<std::vector<std::string>> ToStringList(const json& value) {
  return ToList<std::string>(value, ToString);
}

}  // namespace

JsonFieldReader::JsonFieldReader(const json& object, std::string source)
    : JsonFieldReader(object, std::move(source), "", std::make_shared<absl::Status>()) {}

JsonFieldReader::JsonFieldReader(const json& object, std::string source, std::string path_prefix,
                                 std::shared_ptr<absl::Status> status)
    : object_(&object),
      source_(std::move(source)),
      path_prefix_(std::move(path_prefix)),
      status_(std::move(status)) {
  if (!object_->is_object()) {
    FailType("", "a JSON object", *object_);
    object_ = &EmptyObject();
  }
}

const json* JsonFieldReader::Find(std::string_view key) const {
  const auto it = object_->find(key);
  return it == object_->end() ? nullptr : &*it;
}

bool JsonFieldReader::Has(std::string_view key) const {
  const json* value = Find(key);
  return value != nullptr && !value->is_null();
}

void JsonFieldReader::Fail(std::string_view key, std::string_view problem) {
  if (!status_->ok()) return;  // keep the first error: later ones are often its consequences
  std::string field = absl::StrFormat("%s%s", path_prefix_, key);
  if (!field.empty() && field.back() == '.') field.pop_back();  // the object itself
  *status_ = absl::InvalidArgumentError(absl::StrFormat(
      "%s: %s%s", source_, field.empty() ? "" : absl::StrCat(field, ": "), problem));
}

void JsonFieldReader::FailType(std::string_view key, std::string_view expected, const json& value) {
  Fail(key, absl::StrFormat("expected %s, got %s", expected, Describe(value)));
}

template <typename T, typename Convert>
T JsonFieldReader::Read(std::string_view key, bool required, T fallback, std::string_view expected,
                        Convert convert) {
  if (!Has(key)) {
    if (required) Fail(key, "missing");
    return fallback;
  }
  const json& value = *Find(key);
  std::optional<T> converted = convert(value);
  if (!converted) {
    FailType(key, expected, value);
    return fallback;
  }
  return *std::move(converted);
}

int64_t JsonFieldReader::Int(std::string_view key) {
  return Read<int64_t>(key, /*required=*/true, 0, "an integer", ToInt);
}

int64_t JsonFieldReader::PositiveInt(std::string_view key) {
  const int64_t value = Read<int64_t>(key, /*required=*/true, 1, "an integer", ToInt);
  if (value > 0) return value;
  Fail(key, absl::StrCat("expected a positive integer, got ", value));
  return 1;
}

double JsonFieldReader::Number(std::string_view key) {
  return Read<double>(key, /*required=*/true, 0.0, "a number", ToNumber);
}

std::string JsonFieldReader::String(std::string_view key) {
  return Read<std::string>(key, /*required=*/true, "", "a string", ToString);
}

std::vector<int64_t> JsonFieldReader::IntList(std::string_view key) {
  return Read<std::vector<int64_t>>(key, /*required=*/true, {}, "a list of integers", ToIntList);
}

std::vector<std::string> JsonFieldReader::StringList(std::string_view key) {
  return Read<std::vector<std::string>>(key, /*required=*/true, {}, "a list of strings",
                                        ToStringList);
}

int64_t JsonFieldReader::IntOr(std::string_view key, int64_t fallback) {
  return Read<int64_t>(key, /*required=*/false, fallback, "an integer", ToInt);
}

double JsonFieldReader::NumberOr(std::string_view key, double fallback) {
  return Read<double>(key, /*required=*/false, fallback, "a number", ToNumber);
}

bool JsonFieldReader::BoolOr(std::string_view key, bool fallback) {
  return Read<bool>(key, /*required=*/false, fallback, "true or false", ToBool);
}

std::string JsonFieldReader::StringOr(std::string_view key, std::string_view fallback) {
  return Read<std::string>(key, /*required=*/false, std::string(fallback), "a string", ToString);
}

std::optional<std::vector<std::string>> JsonFieldReader::OptionalStringList(std::string_view key) {
  if (!Has(key)) return std::nullopt;
  return Read<std::vector<std::string>>(key, /*required=*/false, {}, "a list of strings",
                                        ToStringList);
}

std::vector<int64_t> JsonFieldReader::IntOrIntList(std::string_view key) {
  return Read<std::vector<int64_t>>(key, /*required=*/false, {}, "an integer or a list of integers",
                                    [](const json& value) -> std::optional<std::vector<int64_t>> {
                                      if (std::optional<int64_t> single = ToInt(value))
                                        return std::vector<int64_t>{*single};
                                      return ToIntList(value);
                                    });
}

JsonFieldReader JsonFieldReader::Object(std::string_view key) {
  const std::string path = absl::StrFormat("%s%s.", path_prefix_, key);
  const json* value = Find(key);
  if (value == nullptr || value->is_null()) {
    Fail(key, "missing");
    return JsonFieldReader(EmptyObject(), source_, path, status_);
  }
  return JsonFieldReader(*value, source_, path, status_);
}

}  // namespace specd::io
