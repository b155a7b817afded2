#pragma once
// The directories a request may name paths under (the trainer's jobs: their output directories and
// every path in their configs). A path is inside when, with `..` and the symlinks of its existing
// part resolved, it lies under one of the roots, themselves resolved: so neither an absolute path,
// nor `..`, nor a symlink inside a root that points out of it, escapes.
#include <filesystem>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace specd::io {

// The exit status of a `specd` command refused a path (sysexits' EX_NOPERM), so that a parent
// process can tell it from a bad config.
inline constexpr int kPermissionDeniedExitStatus = 77;

class AllowedRoots {
 public:
  // INVALID_ARGUMENT for no roots, or a root that is not an existing directory.
  static absl::StatusOr<AllowedRoots> Create(const std::vector<std::filesystem::path>& roots);

  // OK, or PERMISSION_DENIED naming `what` (e.g. "output_dir"), the path and the roots.
  absl::Status Check(const std::filesystem::path& path, absl::string_view what) const;

  // Resolved, absolute.
  const std::vector<std::filesystem::path>& roots() const { return roots_; }

 private:
  explicit AllowedRoots(std::vector<std::filesystem::path> roots) : roots_(std::move(roots)) {}

  std::vector<std::filesystem::path> roots_;
};

}  // namespace specd::io
