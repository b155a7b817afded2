#pragma once
// Reads the safetensors format: an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and [begin, end) offsets into the data section, then the data section.
// Every claim of the header is checked against the bytes before any view is handed out.
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/io/tensor_view.h"

namespace specd::io {

// The free-form string→string `__metadata__` entry of a header (e.g. {"format": "pt"}).
using SafetensorsMetadata = std::map<std::string, std::string>;

// Headers above this size are rejected before parsing, as the reference Rust implementation does.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

class SafetensorsFile {
 public:
  // Parses a whole file held in memory. The views point into `file_bytes`, which the caller keeps
  // alive; `source` names the bytes in error messages.
  static absl::StatusOr<SafetensorsFile> Parse(std::span<const std::byte> file_bytes,
                                               const std::string& source);

  // Maps the file read-only and parses it; the views share ownership of the mapping.
  static absl::StatusOr<SafetensorsFile> Open(const std::filesystem::path& path);

  // Every tensor in the order its bytes appear in the file.
  const std::vector<TensorView>& tensors() const { return tensors_; }

  // The tensor called `name`, or nullptr if the file has none.
  const TensorView* Find(std::string_view name) const;

  const SafetensorsMetadata& metadata() const { return metadata_; }

 private:
  SafetensorsFile(std::vector<TensorView> tensors, SafetensorsMetadata metadata);

  std::vector<TensorView> tensors_;
  std::map<std::string, size_t, std::less<>> index_by_name_;  // transparent: finds by string_view
  SafetensorsMetadata metadata_;
};

}  // namespace specd::io
