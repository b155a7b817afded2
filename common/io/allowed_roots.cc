#include "common/io/allowed_roots.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace specd::io {
namespace {

// Absolute, `..` and the symlinks of the existing part resolved, the rest normalized.
std::filesystem::path Resolved(const std::filesystem::path& path, std::error_code& error) {
  const std::filesystem::path absolute = std::filesystem::absolute(path, error);
  if (error) return {};
  return std::filesystem::weakly_canonical(absolute, error);
}

bool Under(const std::filesystem::path& path, const std::filesystem::path& root) {
  return std::mismatch(root.begin(), root.end(), path.begin(), path.end()).first == root.end();
}

}  // namespace

absl::StatusOr<AllowedRoots> AllowedRoots::Create(const std::vector<std::filesystem::path>& roots) {
  if (roots.empty()) return absl::InvalidArgumentError("no allowed roots");
  std::vector<std::filesystem::path> resolved;
  for (const std::filesystem::path& root : roots) {
    std::error_code error;
    std::filesystem::path canonical = std::filesystem::canonical(root, error);
    if (error || !std::filesystem::is_directory(canonical)) {
      return absl::InvalidArgumentError(
          absl::StrCat("allowed root ", root.string(), " is not a directory"));
    }
    resolved.push_back(std::move(canonical));
  }
  return AllowedRoots(std::move(resolved));
}

absl::Status AllowedRoots::Check(const std::filesystem::path& path, absl::string_view what) const {
  std::error_code error;
  const std::filesystem::path resolved = Resolved(path, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat(what, ": ", path.string(), " cannot be resolved: ", error.message()));
  }
  if (std::any_of(roots_.begin(), roots_.end(),
                  [&](const std::filesystem::path& root) { return Under(resolved, root); })) {
    return absl::OkStatus();
  }
  std::vector<std::string> names;
  for (const std::filesystem::path& root : roots_) names.push_back(root.string());
  return absl::PermissionDeniedError(absl::StrCat(
      what, ": ", path.string(), resolved == path ? "" : absl::StrCat(" (", resolved.string(), ")"),
      " is outside the allowed roots: ", absl::StrJoin(names, ", ")));
}

}  // namespace specd::io
