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

// Lets the kernel drop from this process's resident memory the whole pages inside `bytes`, a
// range of a read-only file mapping whose contents were copied out (they stay in the page cache
// and are read back if touched again). Partial pages at either end are kept: a neighbouring
// tensor may still be in use.
void ReleaseResidentPages(std::span<const std::byte> bytes);

}  // namespace specd::io
