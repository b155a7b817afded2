#pragma once
// Writes one safetensors file in the layout the reference implementation produces.
#include <filesystem>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "common/io/safetensors_file.h"
#include "common/io/tensor_view.h"

namespace specd::io {

// Checks what WriteSafetensorsFile requires of its tensors: unique names other than the reserved
// "__metadata__", and bytes that exactly fill each dtype and shape. `destination` names the
// file or directory in the message.
absl::Status CheckTensorsWritable(std::span<const TensorView> tensors,
                                  const std::string& destination);

// Writes `tensors` (their name, dtype, shape and bytes; `owner` is ignored) to `path`, replacing
// it atomically. As in the reference implementation, tensors with larger elements come first
// (otherwise in the given order) and the JSON header is padded with spaces to a multiple of 8
// bytes, so every tensor's data starts aligned to its element size in a mapped file. Fails
// without touching `path` on a repeated or reserved name, or bytes that do not match the shape.
absl::Status WriteSafetensorsFile(const std::filesystem::path& path,
                                  std::span<const TensorView> tensors,
                                  const SafetensorsMetadata& metadata = {});

}  // namespace specd::io
