#pragma once
// Writes a dense checkpoint GPTQ-quantized (gptq.h) as a compressed-tensors `pack-quantized`
// W4A16 one, the format quantize_checkpoint.h writes for RTN: the Linears whose calibration
// Hessians are given are quantized, every other tensor is copied unchanged, and the Linears left
// dense are named in the config's ignore list. Tensor names are taken as they are, so it serves
// any layout: a Qwen3.5 target or a z-lab DFlash drafter (`fc`, `layers.0.self_attn.q_proj`), as
// Nota's drafter recipe quantizes it (research/dflash.md §6.6).
#include <ATen/core/Tensor.h>

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/quantize/gptq.h"
#include "common/quantize/quantize_checkpoint.h"
#include "nlohmann/json.hpp"

namespace specd::quant {

// Hessians [in, in] by Linear module name (the weight's name without ".weight", e.g.
// "layers.0.mlp.up_proj"), as HessianAccumulator::hessian() gives them.
using LinearHessians = std::map<std::string, at::Tensor>;

// The `quantization_config` for Linears GPTQ-quantized with `options` (actorder "group" with
// act_order) and `ignore` left dense.
nlohmann::json GptqCompressedTensorsConfig(const GptqOptions& options,
                                           const std::vector<std::string>& ignore);

// Writes into `out_dir` (created if missing; it must be empty) the safetensors, config.json with
// GptqCompressedTensorsConfig added (its ignore list: every two-dimensional `.weight` tensor
// left dense), and the tokenizer and generation files found beside the input. Scales are stored
// in the dtype of the weight they scale, whatever options.scale_dtype says. Refuses an input that
// already has a quantization_config, and a Hessian that names no two-dimensional float weight or
// whose size or group size does not fit it, before writing anything. The quantized tensors are
// held in memory until written (a drafter's size). `progress`, if set, is called after each
// input tensor.
absl::Status WriteGptqCheckpoint(const std::filesystem::path& model_dir,
                                 const LinearHessians& hessians, const GptqOptions& options,
                                 const std::filesystem::path& out_dir,
                                 const std::function<void(const QuantizeProgress&)>& progress = {});

}  // namespace specd::quant
