#include "services/trainer/service/job_names.h"

#include <algorithm>
#include <cctype>

namespace specd::trainer {
namespace {

// "JOB_TYPE_DRAFTER_STAGE1" without `prefix`, lower case, '_' → '-': "drafter-stage1".
std::string ShortName(const std::string& enum_name, std::string_view prefix) {
  std::string name = enum_name.substr(std::min(prefix.size(), enum_name.size()));
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) {
    return c == '_' ? '-' : static_cast<char>(std::tolower(c));
  });
  return name;
}

std::string EnumName(std::string_view prefix, std::string_view name) {
  std::string full(prefix);
  for (const char c : name) {
    full.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  }
  return full;
}

constexpr std::string_view kTypePrefix = "JOB_TYPE_";
constexpr std::string_view kStatePrefix = "JOB_STATE_";

}  // namespace

std::string JobTypeName(v1::JobType type) { return ShortName(v1::JobType_Name(type), kTypePrefix); }

std::string JobStateName(v1::JobState state) {
  return ShortName(v1::JobState_Name(state), kStatePrefix);
}

std::optional<v1::JobType> ParseJobTypeName(std::string_view name) {
  v1::JobType type;
  if (name.find('_') != std::string_view::npos ||
      !v1::JobType_Parse(EnumName(kTypePrefix, name), &type) || type == v1::JOB_TYPE_UNSPECIFIED) {
    return std::nullopt;
  }
  return type;
}

std::optional<v1::JobState> ParseJobStateName(std::string_view name) {
  v1::JobState state;
  if (name.find('_') != std::string_view::npos ||
      !v1::JobState_Parse(EnumName(kStatePrefix, name), &state) ||
      state == v1::JOB_STATE_UNSPECIFIED) {
    return std::nullopt;
  }
  return state;
}

bool IsTerminal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

}  // namespace specd::trainer
