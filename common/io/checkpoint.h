#pragma once
// A Hugging Face checkpoint directory read as one set of named tensors: either a single
// `model.safetensors`, or shards listed by `model.safetensors.index.json`.
#include <filesystem>
#include <functional>
#include <map>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/io/tensor_view.h"

namespace specd::io {

inline constexpr char kSingleFileName[] = "model.safetensors";
inline constexpr char kShardIndexFileName[] = "model.safetensors.index.json";

class Checkpoint {
 public:
  // Maps every shard and checks that the index and the shards agree: each tensor the index names
  // is in the shard it names, and each shard holds only tensors the index places there.
  // A single `model.safetensors` wins over an index, as in transformers.
  static absl::StatusOr<Checkpoint> Open(const std::filesystem::path& dir);

  // The safetensors files, in the order their tensors are listed.
  const std::vector<std::filesystem::path>& shard_paths() const { return shard_paths_; }

  // Every tensor, shard by shard, each shard in file order.
  const std::vector<TensorView>& tensors() const { return tensors_; }

  // The tensor called `name`, or nullptr.
  const TensorView* Find(std::string_view name) const;

  // The tensor called `name`, or NotFound naming the tensor and the directory.
  absl::StatusOr<const TensorView*> Get(std::string_view name) const;

  // For a tensor of this checkpoint whose contents were copied out: lets its whole pages leave
  // this process's resident memory (ReleaseResidentPages; every tensor here lies in a read-only
  // file mapping, so the pages are read back from the file if touched again).
  void ReleaseResidentPages(const TensorView& tensor) const;

 private:
  Checkpoint(std::filesystem::path dir, std::vector<std::filesystem::path> shard_paths,
             std::vector<TensorView> tensors);

  std::filesystem::path dir_;  // for error messages
  std::vector<std::filesystem::path> shard_paths_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t, std::less<>> index_by_name_;  // transparent: finds by string_view
};

}  // namespace specd::io
