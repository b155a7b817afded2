#pragma once
// Writes a checkpoint directory's tensors the way transformers' save_pretrained does.
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "common/io/safetensors_file.h"
#include "common/io/tensor_view.h"

namespace specd::io {

// Consecutive runs of `items` whose sizes (size_of(item), in bytes) add up to at most `max_bytes`
// each, in order; an item larger than the limit gets a run of its own. How checkpoints shard.
template <typename T, typename SizeOf>
std::vector<std::span<const T>> SplitIntoShards(std::span<const T> items, uint64_t max_bytes,
                                                SizeOf size_of) {
  std::vector<std::span<const T>> shards;
  size_t begin = 0;
  uint64_t bytes = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const uint64_t size = size_of(items[i]);
    if (i > begin && bytes + size > max_bytes) {
      shards.push_back(items.subspan(begin, i - begin));
      begin = i;
      bytes = 0;
    }
    bytes += size;
  }
  shards.push_back(items.subspan(begin));
  return shards;
}

// The shard size of every checkpoint specd writes.
inline constexpr uint64_t kMaxShardBytes = uint64_t{2} << 30;

// Writes `tensors` into `dir` (which must exist) in shards of at most `max_shard_bytes` of tensor
// data, filled in the given order; a tensor larger than the limit gets a shard of its own.
// One shard is written as `model.safetensors`; several as `model-00001-of-0000N.safetensors` plus
// `model.safetensors.index.json` (`metadata.total_size`, `weight_map`), written last. Every shard
// carries `metadata`. Checkpoint files left from an earlier save that the new layout does not use
// are removed, so a reader never mixes the two.
absl::Status WriteCheckpointTensors(const std::filesystem::path& dir,
                                    std::span<const TensorView> tensors, uint64_t max_shard_bytes,
                                    const SafetensorsMetadata& metadata = {});

}  // namespace specd::io
