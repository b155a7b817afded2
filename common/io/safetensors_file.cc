#include "common/io/safetensors_file.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/io/mapped_file.h"
#include "nlohmann/json.hpp"

namespace specd::io {
namespace {

using nlohmann::json;

constexpr size_t kHeaderLengthBytes = 8;

// A valid header nests no deeper than root object → tensor entry → shape list; refusing deeper
// containers as they open also bounds what a hostile header can make the parser allocate.
constexpr int kMaxContainerDepth = 2;

template <typename... Parts>
absl::Status HeaderError(const std::string& source, const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", parts...));
}

// Thrown from the JSON parser callback to stop parsing at the first structural problem.
struct RejectedHeader {
  std::string reason;
};

// nlohmann::json keeps the last of several equal keys; a safetensors header with a repeated
// tensor name (or field) is ambiguous, so it is rejected instead.
absl::StatusOr<json> ParseHeaderJson(std::string_view text, const std::string& source) {
  std::vector<absl::flat_hash_set<std::string>> keys_of_open_objects;
  const json::parser_callback_t reject_duplicates_and_depth =
      [&](int depth, json::parse_event_t event, json& parsed) {
        switch (event) {
          case json::parse_event_t::object_start:
          case json::parse_event_t::array_start:
            if (depth > kMaxContainerDepth) {
              throw RejectedHeader{absl::StrCat("header nests JSON containers deeper than ",
                                                kMaxContainerDepth + 1, " levels")};
            }
            if (event == json::parse_event_t::object_start) keys_of_open_objects.emplace_back();
            break;
          case json::parse_event_t::object_end:
            keys_of_open_objects.pop_back();
            break;
          case json::parse_event_t::key:
            if (!keys_of_open_objects.back().insert(parsed.get<std::string>()).second) {
              throw RejectedHeader{
                  absl::StrCat("header repeats the key \"", parsed.get<std::string>(), "\"")};
            }
            break;
          default:
            break;
        }
        return true;
      };
  try {
    return json::parse(text, reject_duplicates_and_depth);
  } catch (const RejectedHeader& rejected) {
    return HeaderError(source, rejected.reason);
  } catch (const json::exception& error) {
    return HeaderError(source, "header is not valid JSON: ", error.what());
  }
}

absl::StatusOr<SafetensorsMetadata> ParseMetadata(const json& value, const std::string& source) {
  if (!value.is_object()) return HeaderError(source, "__metadata__ is not a JSON object");
  SafetensorsMetadata metadata;
  for (const auto& [key, entry] : value.items()) {
    if (!entry.is_string()) {
      return HeaderError(source, "__metadata__ value of \"", key, "\" is not a string");
    }
    metadata.emplace(key, entry.get<std::string>());
  }
  return metadata;
}

// A tensor's header entry, before its offsets are checked against the other tensors.
struct HeaderEntry {
  TensorView view;  // all but the bytes
  uint64_t begin = 0;
  uint64_t end = 0;
};

absl::StatusOr<HeaderEntry> ParseTensorEntry(const std::string& name, const json& value,
                                             const std::string& source) {
  const std::string context = absl::StrCat("tensor \"", name, "\": ");
  if (!value.is_object()) return HeaderError(source, context, "entry is not a JSON object");
  const auto dtype_field = value.find("dtype");
  const auto shape_field = value.find("shape");
  const auto offsets_field = value.find("data_offsets");
  if (dtype_field == value.end() || !dtype_field->is_string()) {
    return HeaderError(source, context, "\"dtype\" is missing or not a string");
  }
  if (shape_field == value.end() || !shape_field->is_array()) {
    return HeaderError(source, context, "\"shape\" is missing or not a list");
  }
  if (offsets_field == value.end() || !offsets_field->is_array() || offsets_field->size() != 2) {
    return HeaderError(source, context, "\"data_offsets\" is missing or not a list of two");
  }

  HeaderEntry entry;
  entry.view.name = name;
  const std::string& dtype_name = dtype_field->get_ref<const std::string&>();
  const std::optional<DType> dtype = DTypeFromName(dtype_name);
  if (!dtype) return HeaderError(source, context, "unknown dtype \"", dtype_name, "\"");
  entry.view.dtype = *dtype;

  for (const json& dim : *shape_field) {
    if (dim.is_number_integer() && !dim.is_number_unsigned()) {  // only negatives parse as signed
      return HeaderError(source, context, "negative dimension ", dim.get<int64_t>(), " in shape");
    }
    if (!dim.is_number_unsigned() || dim.get<uint64_t>() > INT64_MAX) {
      return HeaderError(source, context, "shape holds ", dim.dump(), ", not a dimension");
    }
    entry.view.shape.push_back(static_cast<int64_t>(dim.get<uint64_t>()));
  }

  for (const json& offset : *offsets_field) {
    if (!offset.is_number_unsigned()) {
      return HeaderError(source, context, "data_offsets holds ", offset.dump(),
                         ", not a byte offset");
    }
  }
  entry.begin = (*offsets_field)[0].get<uint64_t>();
  entry.end = (*offsets_field)[1].get<uint64_t>();
  if (entry.begin > entry.end) {
    return HeaderError(source, context, "data_offsets [", entry.begin, ", ", entry.end,
                       "] end before they begin");
  }

  const std::optional<uint64_t> byte_size = TensorByteSize(entry.view.dtype, entry.view.shape);
  const std::string shape_text = absl::StrCat("[", absl::StrJoin(entry.view.shape, ", "), "]");
  if (!byte_size) {
    return HeaderError(source, context, "shape ", shape_text, " of ", dtype_name,
                       " overflows 64 bits");
  }
  if (*byte_size != entry.end - entry.begin) {
    return HeaderError(source, context, "shape ", shape_text, " of ", dtype_name, " needs ",
                       *byte_size, " bytes but data_offsets [", entry.begin, ", ", entry.end,
                       "] hold ", entry.end - entry.begin);
  }
  return entry;
}

// The format requires the tensors to tile the data section exactly: no gaps, no overlaps, no
// trailing bytes. `entries` must be sorted by offsets.
absl::Status CheckTensorsTileData(const std::vector<HeaderEntry>& entries, uint64_t data_size,
                                  const std::string& source) {
  uint64_t covered_until = 0;
  const std::string* previous_name = nullptr;
  for (const HeaderEntry& entry : entries) {
    if (entry.end > data_size) {
      return HeaderError(source, "tensor \"", entry.view.name, "\": data_offsets [", entry.begin,
                         ", ", entry.end, "] run past the ", data_size, "-byte data section");
    }
    if (entry.begin < covered_until) {
      return HeaderError(source, "tensors \"", *previous_name, "\" and \"", entry.view.name,
                         "\" overlap");
    }
    if (entry.begin > covered_until) {
      return HeaderError(source, "data bytes [", covered_until, ", ", entry.begin,
                         ") belong to no tensor (a hole before \"", entry.view.name, "\")");
    }
    covered_until = entry.end;
    previous_name = &entry.view.name;
  }
  if (covered_until != data_size) {
    return HeaderError(source, "data bytes [", covered_until, ", ", data_size,
                       ") belong to no tensor (trailing bytes after the last tensor)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SafetensorsFile> SafetensorsFile::Parse(std::span<const std::byte> file_bytes,
                                                       const std::string& source) {
  if (file_bytes.size() < kHeaderLengthBytes) {
    return HeaderError(source, "file is ", file_bytes.size(),
                       " bytes, shorter than the 8-byte header length");
  }
  uint64_t header_size = 0;  // the format stores it little-endian, as is every supported host
  std::memcpy(&header_size, file_bytes.data(), kHeaderLengthBytes);
  if (header_size > kMaxSafetensorsHeaderBytes) {
    return HeaderError(source, "header length ", header_size, " exceeds the limit of ",
                       kMaxSafetensorsHeaderBytes, " bytes");
  }
  const std::span<const std::byte> after_length = file_bytes.subspan(kHeaderLengthBytes);
  if (header_size > after_length.size()) {
    return HeaderError(source, "header length ", header_size, " exceeds the ", after_length.size(),
                       " bytes after the length field");
  }
  const std::string_view header_text(reinterpret_cast<const char*>(after_length.data()),
                                     header_size);
  const std::span<const std::byte> data = after_length.subspan(header_size);

  absl::StatusOr<json> header = ParseHeaderJson(header_text, source);
  if (!header.ok()) return header.status();
  if (!header->is_object()) return HeaderError(source, "header is not a JSON object");

  SafetensorsMetadata metadata;
  std::vector<HeaderEntry> entries;
  for (const auto& [key, value] : header->items()) {
    if (key == "__metadata__") {
      absl::StatusOr<SafetensorsMetadata> parsed = ParseMetadata(value, source);
      if (!parsed.ok()) return parsed.status();
      metadata = *std::move(parsed);
      continue;
    }
    absl::StatusOr<HeaderEntry> entry = ParseTensorEntry(key, value, source);
    if (!entry.ok()) return entry.status();
    entries.push_back(*std::move(entry));
  }

  // Stable, so tensors sharing an offset (empty ones) keep the header's name order.
  std::stable_sort(entries.begin(), entries.end(), [](const HeaderEntry& a, const HeaderEntry& b) {
    return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
  });
  if (absl::Status tiled = CheckTensorsTileData(entries, data.size(), source); !tiled.ok()) {
    return tiled;
  }

  std::vector<TensorView> tensors;
  tensors.reserve(entries.size());
  for (HeaderEntry& entry : entries) {
    entry.view.bytes = data.subspan(entry.begin, entry.end - entry.begin);
    tensors.push_back(std::move(entry.view));
  }
  return SafetensorsFile(std::move(tensors), std::move(metadata));
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::filesystem::path& path) {
  absl::StatusOr<std::shared_ptr<const MappedFile>> mapping = MappedFile::Open(path);
  if (!mapping.ok()) return mapping.status();
  absl::StatusOr<SafetensorsFile> file = Parse((*mapping)->bytes(), path.string());
  if (!file.ok()) return file.status();
  for (TensorView& tensor : file->tensors_) tensor.owner = *mapping;
  return file;
}

SafetensorsFile::SafetensorsFile(std::vector<TensorView> tensors, SafetensorsMetadata metadata)
    : tensors_(std::move(tensors)), metadata_(std::move(metadata)) {
  for (size_t i = 0; i < tensors_.size(); ++i) index_by_name_.emplace(tensors_[i].name, i);
}

const TensorView* SafetensorsFile::Find(std::string_view name) const {
  const auto it = index_by_name_.find(name);
  return it == index_by_name_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace specd::io
