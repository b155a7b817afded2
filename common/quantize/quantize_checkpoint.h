#pragma once
// Turns a dense Qwen3.5 checkpoint (either layout, sharded or not, float32/bfloat16/float16) into
// a compressed-tensors `pack-quantized` W4A16 one (research/qwen35.md §5) that vLLM,
// transformers and this project load: every Linear of the text model that the ignore list
// leaves in is rounded onto its min-max grid (rtn.h), every other tensor is copied unchanged.
// Tensors stream through one output shard at a time; the input stays memory-mapped.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/int4/rtn.h"
#include "common/io/checkpoint_writer.h"
#include "nlohmann/json.hpp"

namespace specd::quant {

// llm-compressor's Qwen3.5 recipes (LM head, embeddings, vision tower, MTP head) plus
// in_proj_a/in_proj_b, whose one output row per value head is too narrow for Marlin.
std::vector<std::string> DefaultQuantizeIgnore();

struct QuantizeOptions {
  // Group size (0: one scale per output row) and symmetry. Scales are stored in the dtype of the
  // weight they scale, whatever rtn.scale_dtype says.
  RtnOptions rtn = {};
  // Module names or "re:" patterns (Python re.match) of Linears to leave dense. Only the text
  // model's Linears are ever quantized: vision and MTP tensors are copied, so keep them here
  // for the written config to say so.
  std::vector<std::string> ignore = DefaultQuantizeIgnore();
  uint64_t max_shard_bytes = io::kMaxShardBytes;  // of tensor data per output shard
};

struct QuantizeProgress {
  int64_t done = 0;  // input tensors handled, this one included
  int64_t total = 0;
  std::string name;  // of this input tensor
  bool quantized = false;
};

// Tensors that take the place of the checkpoint's own, by name, before quantizing or copying:
// AWQ's smoothed Linear weights and the norms it folded the smoothing into. Each has the shape
// of the tensor it replaces and any float dtype; it is written (or quantized) as that tensor's
// dtype.
using WeightOverrides = std::map<std::string, at::Tensor>;

// The `quantization_config` block of config.json for Linears RTN-quantized with `rtn` and
// `ignore` left dense (research/qwen35.md §5.4).
nlohmann::json CompressedTensorsConfig(const RtnOptions& rtn,
                                       const std::vector<std::string>& ignore);

// Steps every writer of a quantized checkpoint takes (this one and gptq_checkpoint.h):
// the input's config.json is read, and refused when it already has a quantization_config;
absl::StatusOr<nlohmann::json> ReadDenseConfig(const std::filesystem::path& model_dir);
// `dir` is created if missing and must be empty;
absl::Status PrepareOutputDir(const std::filesystem::path& dir);
// the tokenizer and generation files found beside the input weights are copied;
absl::Status CopySideFiles(const std::filesystem::path& model_dir,
                           const std::filesystem::path& out_dir);
// and `config` is written as `dir`/config.json last, so that a directory whose config claims
// quantized weights has all of them.
absl::Status WriteConfigJson(const std::filesystem::path& dir, const nlohmann::json& config);

// Writes the quantized checkpoint into `out_dir` (created if missing; it must be empty):
// safetensors shards (and their index), config.json with CompressedTensorsConfig added, and the
// tokenizer and generation files found beside the input. Refuses an input that already has a
// quantization_config, a group size that does not divide a quantized Linear's input width, and
// overrides that name no tensor of the input or disagree with its shape, before writing
// anything. `progress`, if set, is called after each input tensor.
absl::Status QuantizeCheckpoint(const std::filesystem::path& model_dir,
                                const std::filesystem::path& out_dir,
                                const QuantizeOptions& options,
                                const std::function<void(const QuantizeProgress&)>& progress = {},
                                const WeightOverrides* overrides = nullptr);

}  // namespace specd::quant
