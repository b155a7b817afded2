#include "common/io/safetensors_writer.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/io/atomic_file.h"
#include "nlohmann/json.hpp"

namespace specd::io {

absl::Status CheckTensorsWritable(std::span<const TensorView> tensors,
                                  const std::string& destination) {
  absl::flat_hash_set<std::string_view> names;
  for (const TensorView& tensor : tensors) {
    const std::string context = absl::StrCat(destination, ": tensor \"", tensor.name, "\": ");
    if (tensor.name == "__metadata__") {
      return absl::InvalidArgumentError(absl::StrCat(context, "the name is reserved"));
    }
    if (!names.insert(tensor.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(context, "the name is repeated"));
    }
    const std::optional<uint64_t> byte_size = TensorByteSize(tensor.dtype, tensor.shape);
    if (!byte_size || *byte_size != tensor.bytes.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          context, tensor.bytes.size(), " bytes do not hold a ", DTypeName(tensor.dtype),
          " tensor of shape [", absl::StrJoin(tensor.shape, ", "), "]"));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteSafetensorsFile(const std::filesystem::path& path,
                                  std::span<const TensorView> tensors,
                                  const SafetensorsMetadata& metadata) {
  if (absl::Status writable = CheckTensorsWritable(tensors, path.string()); !writable.ok()) {
    return writable;
  }

  std::vector<const TensorView*> layout;
  for (const TensorView& tensor : tensors) layout.push_back(&tensor);
  std::stable_sort(layout.begin(), layout.end(), [](const TensorView* a, const TensorView* b) {
    return DTypeSize(a->dtype) > DTypeSize(b->dtype);
  });

  // Ordered, so the header lists the tensors in the order of their bytes.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const TensorView* tensor : layout) {
    const uint64_t end = offset + tensor->bytes.size();
    header[tensor->name] = {{"dtype", DTypeName(tensor->dtype)},
                            {"shape", tensor->shape},
                            {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string header_text;
  try {
    header_text = header.dump();
  } catch (const nlohmann::json::exception& error) {  // a name or metadata that is not UTF-8
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": ", error.what()));
  }
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  const uint64_t header_size = header_text.size();  // stored little-endian, as the host is

  absl::StatusOr<AtomicFile> file = AtomicFile::Create(path);
  if (!file.ok()) return file.status();
  if (absl::Status status = file->Append(std::as_bytes(std::span(&header_size, 1))); !status.ok()) {
    return status;
  }
  if (absl::Status status = file->Append(std::as_bytes(std::span(header_text))); !status.ok()) {
    return status;
  }
  for (const TensorView* tensor : layout) {
    if (absl::Status status = file->Append(tensor->bytes); !status.ok()) return status;
  }
  return file->Commit();
}

}  // namespace specd::io
