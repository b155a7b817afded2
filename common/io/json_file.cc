#include "common/io/json_file.h"

#include <cerrno>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace specd::io {

absl::StatusOr<nlohmann::json> ReadJsonFile(const std::filesystem::path& path) {
  std::ifstream stream(path);
  if (!stream) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path.string()));
  try {
    return nlohmann::json::parse(stream);
  } catch (const nlohmann::json::exception& error) {
    return absl::InvalidArgumentError(
        absl::StrCat(path.string(), " is not valid JSON: ", error.what()));
  }
}

}  // namespace specd::io
