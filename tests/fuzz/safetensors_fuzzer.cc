// libFuzzer entry point for the safetensors parser: any byte string must become either a file
// whose views lie inside the input or an error status, without crashing, hanging or leaking.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "common/io/safetensors_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> input = std::as_bytes(std::span(data, size));
  absl::StatusOr<specd::io::SafetensorsFile> file =
      specd::io::SafetensorsFile::Parse(input, "fuzz input");
  if (!file.ok()) return 0;
  for (const specd::io::TensorView& tensor : file->tensors()) {
    // A view outside the input would trip AddressSanitizer on these reads.
    if (!tensor.bytes.empty()) {
      volatile std::byte first = tensor.bytes.front();
      volatile std::byte last = tensor.bytes.back();
      (void)first;
      (void)last;
    }
    if (file->Find(tensor.name) != &tensor) std::abort();
  }
  return 0;
}
