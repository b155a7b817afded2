#pragma once
// A whole file mapped read-only into memory, so tensors can be read without copying.
#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>

#include "absl/status/statusor.h"

namespace specd::io {

class MappedFile {
 public:
  static absl::StatusOr<std::shared_ptr<const MappedFile>> Open(const std::filesystem::path& path);

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return bytes_; }

 private:
  explicit MappedFile(std::span<const std::byte> bytes) : bytes_(bytes) {}

  std::span<const std::byte> bytes_;  // empty for an empty file, which is not mapped
};

}  // namespace specd::io
