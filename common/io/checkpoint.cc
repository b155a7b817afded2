#include "common/io/checkpoint.h"

#include <algorithm>
#include <map>
#include <string>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/io/json_file.h"
#include "common/io/mapped_file.h"
#include "common/io/safetensors_file.h"

namespace specd::io {
namespace {

bool IsRegularFile(const std::filesystem::path& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error);
}

// A shard file name from the index, refused if it would reach outside the checkpoint directory.
bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

// The index's `weight_map` grouped by shard file: shard name → tensor names.
absl::StatusOr<std::map<std::string, std::vector<std::string>>> ReadShardIndex(
    const std::filesystem::path& index_path) {
  absl::StatusOr<nlohmann::json> index = ReadJsonFile(index_path);
  if (!index.ok()) return index.status();
  const auto weight_map = index->is_object() ? index->find("weight_map") : index->end();
  if (weight_map == index->end() || !weight_map->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(index_path.string(), ": \"weight_map\" is missing or not a JSON object"));
  }
  std::map<std::string, std::vector<std::string>> tensors_by_shard;
  for (const auto& [tensor_name, shard] : weight_map->items()) {
    if (!shard.is_string() || !IsPlainFileName(shard.get<std::string>())) {
      return absl::InvalidArgumentError(absl::StrCat(index_path.string(), ": tensor \"",
                                                     tensor_name, "\" maps to ", shard.dump(),
                                                     ", not a file name"));
    }
    tensors_by_shard[shard.get<std::string>()].push_back(tensor_name);
  }
  return tensors_by_shard;
}

absl::Status CheckShardMatchesIndex(const SafetensorsFile& shard, const std::string& shard_name,
                                    const std::vector<std::string>& indexed_names,
                                    const std::filesystem::path& index_path) {
  for (const std::string& name : indexed_names) {
    if (shard.Find(name) == nullptr) {
      return absl::NotFoundError(absl::StrCat(index_path.string(), " places tensor \"", name,
                                              "\" in ", shard_name, ", which does not hold it"));
    }
  }
  // Every indexed name is in the shard and names are unique on both sides, so equal counts mean
  // the shard holds nothing else.
  if (shard.tensors().size() != indexed_names.size()) {
    for (const TensorView& tensor : shard.tensors()) {
      if (std::find(indexed_names.begin(), indexed_names.end(), tensor.name) ==
          indexed_names.end()) {
        return absl::InvalidArgumentError(absl::StrCat(shard_name, " holds tensor \"", tensor.name,
                                                       "\", which ", index_path.string(),
                                                       " does not place there"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Checkpoint> Checkpoint::Open(const std::filesystem::path& dir) {
  const std::filesystem::path single_file = dir / kSingleFileName;
  if (IsRegularFile(single_file)) {
    absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(single_file);
    if (!file.ok()) return file.status();
    return Checkpoint(dir, {single_file}, file->tensors());
  }

  const std::filesystem::path index_path = dir / kShardIndexFileName;
  if (!IsRegularFile(index_path)) {
    return absl::NotFoundError(absl::StrCat(dir.string(), " holds neither ", kSingleFileName,
                                            " nor ", kShardIndexFileName));
  }
  absl::StatusOr<std::map<std::string, std::vector<std::string>>> tensors_by_shard =
      ReadShardIndex(index_path);
  if (!tensors_by_shard.ok()) return tensors_by_shard.status();

  std::vector<std::filesystem::path> shard_paths;
  std::vector<TensorView> tensors;
  for (const auto& [shard_name, indexed_names] : *tensors_by_shard) {
    const std::filesystem::path shard_path = dir / shard_name;
    if (!IsRegularFile(shard_path)) {
      return absl::NotFoundError(absl::StrCat(index_path.string(), " names shard ", shard_name,
                                              " (holding \"", indexed_names.front(),
                                              "\"), which is missing"));
    }
    absl::StatusOr<SafetensorsFile> shard = SafetensorsFile::Open(shard_path);
    if (!shard.ok()) return shard.status();
    if (absl::Status matches =
            CheckShardMatchesIndex(*shard, shard_name, indexed_names, index_path);
        !matches.ok()) {
      return matches;
    }
    shard_paths.push_back(shard_path);
    tensors.insert(tensors.end(), shard->tensors().begin(), shard->tensors().end());
  }
  return Checkpoint(dir, std::move(shard_paths), std::move(tensors));
}

Checkpoint::Checkpoint(std::filesystem::path dir, std::vector<std::filesystem::path> shard_paths,
                       std::vector<TensorView> tensors)
    : dir_(std::move(dir)), shard_paths_(std::move(shard_paths)), tensors_(std::move(tensors)) {
  for (size_t i = 0; i < tensors_.size(); ++i) index_by_name_.emplace(tensors_[i].name, i);
}

const TensorView* Checkpoint::Find(std::string_view name) const {
  const auto it = index_by_name_.find(name);
  return it == index_by_name_.end() ? nullptr : &tensors_[it->second];
}

absl::StatusOr<const TensorView*> Checkpoint::Get(std::string_view name) const {
  if (const TensorView* tensor = Find(name)) return tensor;
  return absl::NotFoundError(
      absl::StrFormat("checkpoint %s has no tensor \"%s\"", dir_.string(), name));
}

void Checkpoint::ReleaseResidentPages(const TensorView& tensor) const {
  io::ReleaseResidentPages(tensor.bytes);
}

}  // namespace specd::io
