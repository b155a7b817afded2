#pragma once
// Writes a file so that readers see either the old content or the complete new one: the bytes go
// to a temporary file beside the target, which is synced and renamed over it on Commit.
#include <cstddef>
#include <filesystem>
#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace specd::io {

class AtomicFile {
 public:
  static absl::StatusOr<AtomicFile> Create(const std::filesystem::path& path);

  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  // Without a Commit the temporary file is removed and the target is left as it was.
  ~AtomicFile();

  absl::Status Append(std::span<const std::byte> bytes);

  // Flushes the content to disk and renames the temporary file onto the target path.
  absl::Status Commit();

 private:
  AtomicFile(std::filesystem::path path, std::filesystem::path temporary_path, int fd);

  std::filesystem::path path_;
  std::filesystem::path temporary_path_;
  int fd_;  // -1 once committed or moved from
};

// The whole content of a file in one AtomicFile.
absl::Status WriteFileAtomically(const std::filesystem::path& path,
                                 std::span<const std::byte> bytes);
absl::Status WriteFileAtomically(const std::filesystem::path& path, std::string_view text);

}  // namespace specd::io
