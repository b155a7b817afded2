#pragma once
// Writes a checkpoint directory's tensors the way transformers' save_pretrained does.
#include <cstdint>
#include <filesystem>
#include <span>

#include "absl/status/status.h"
#include "common/io/safetensors_file.h"
#include "common/io/tensor_view.h"

namespace specd::io {

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
