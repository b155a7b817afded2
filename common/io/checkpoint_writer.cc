#include "common/io/checkpoint_writer.h"

#include <regex>
#include <string>
#include <system_error>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/io/atomic_file.h"
#include "common/io/checkpoint.h"
#include "common/io/safetensors_writer.h"
#include "nlohmann/json.hpp"

namespace specd::io {
namespace {

// The Hugging Face naming: "model.safetensors" when alone, else
// "model-00002-of-00005.safetensors" for the second of five.
std::string ShardFileName(size_t index, size_t count) {
  if (count == 1) return kSingleFileName;
  return absl::StrFormat("model-%05d-of-%05d.safetensors", index + 1, count);
}

bool IsCheckpointFileName(const std::string& name) {
  static const std::regex kShardName(R"(model-\d{5}-of-\d{5}\.safetensors)");
  return name == kSingleFileName || name == kShardIndexFileName ||
         std::regex_match(name, kShardName);
}

absl::Status WriteShardIndex(const std::filesystem::path& path,
                             const std::vector<std::span<const TensorView>>& shards) {
  uint64_t total_size = 0;
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    for (const TensorView& tensor : shards[i]) {
      total_size += tensor.bytes.size();
      weight_map[tensor.name] = ShardFileName(i, shards.size());
    }
  }
  const nlohmann::json index = {{"metadata", {{"total_size", total_size}}},
                                {"weight_map", weight_map}};
  // Cannot throw: every name already went into a shard header, which rejects invalid UTF-8.
  return WriteFileAtomically(path, index.dump(2) + "\n");
}

absl::Status RemoveStaleCheckpointFiles(const std::filesystem::path& dir,
                                        const absl::flat_hash_set<std::string>& written) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (IsCheckpointFileName(name) && !written.contains(name) &&
        !std::filesystem::remove(entry.path(), error)) {
      break;
    }
  }
  if (error) {
    return absl::InternalError(absl::StrCat("cannot remove stale checkpoint files in ",
                                            dir.string(), ": ", error.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteCheckpointTensors(const std::filesystem::path& dir,
                                    std::span<const TensorView> tensors, uint64_t max_shard_bytes,
                                    const SafetensorsMetadata& metadata) {
  // Checked up front so a bad tensor in a late shard does not leave a half-written directory.
  if (absl::Status writable = CheckTensorsWritable(tensors, dir.string()); !writable.ok()) {
    return writable;
  }
  const std::vector<std::span<const TensorView>> shards = SplitIntoShards(
      tensors, max_shard_bytes, [](const TensorView& tensor) { return tensor.bytes.size(); });

  absl::flat_hash_set<std::string> written;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name = ShardFileName(i, shards.size());
    written.insert(name);
    if (absl::Status status = WriteSafetensorsFile(dir / name, shards[i], metadata); !status.ok()) {
      return status;
    }
  }
  if (shards.size() > 1) {
    written.insert(kShardIndexFileName);
    if (absl::Status status = WriteShardIndex(dir / kShardIndexFileName, shards); !status.ok()) {
      return status;
    }
  }
  return RemoveStaleCheckpointFiles(dir, written);
}

}  // namespace specd::io
