#pragma once
// AWQ, activation-aware weight quantization (Lin et al. 2023, as llm-compressor's AWQModifier):
// per input channel scales s, searched on calibration activations, that give the channels with
// large activations more of the INT4 grid. Every scale folds exactly into the dense model: the
// layer producing the input (a norm, or a Linear whose output channels feed the next one
// directly) is divided by s and the Linears reading it are multiplied by s. Only the rounding of
// W·s onto the grid changes, so RTN on the folded weights is AWQ.
//
// Mappings for Qwen3.5 (smooth layer → balance Linears):
//   input_layernorm          → self_attn.{q,k,v}_proj  (full attention)
//   input_layernorm          → linear_attn.in_proj_{qkv,z}  (Gated DeltaNet; in_proj_{a,b} read
//                              the same input and are multiplied by s to stay exact)
//   self_attn.v_proj         → self_attn.o_proj  (only without GQA, as llm-compressor)
//   post_attention_layernorm → mlp.{gate,up}_proj
//   mlp.up_proj              → mlp.down_proj
// linear_attn.out_proj is left to plain RTN: its input comes out of the per-head gated RMSNorm,
// whose weight is shared by all heads, so a per-channel scale cannot fold into it.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/int4/rtn.h"
#include "common/quantize/quantize_checkpoint.h"

namespace specd::quant {

struct AwqOptions {
  // The grid the folded weights are quantized onto afterwards. As in QuantizeCheckpoint, scales
  // take the dtype of the weight they scale, whatever rtn.scale_dtype says.
  RtnOptions rtn;
  int64_t grid_points = 20;  // scale exponents searched: 0, 1/n, ..., (n − 1)/n
  // s = mean|X|^r / w_mean^(1 − r) (w_mean: |W| normalised per group, averaged over rows);
  // false: s = mean|X|^r.
  bool duo_scaling = true;
  // Calibration tokens whose activations are kept for the search's loss, per mapping (evenly
  // strided over all tokens); mean|X| uses every token. Memory: rows × (in features) floats for
  // each mapping of the model.
  int64_t max_loss_tokens = 2048;
};

// One smooth layer's search on the calibration data. Errors are the mean squared difference
// between the balance Linears' dense outputs and their outputs after quantization.
struct AwqMapping {
  std::string smooth;                // module name, e.g. "model.layers.0.input_layernorm"
  std::vector<std::string> balance;  // module names
  std::optional<double> ratio;       // exponent r of the scale kept; nullopt: s = 1 (plain RTN)
  double rtn_error = 0;
  double awq_error = 0;  // with the scale kept; never above rtn_error
};

struct AwqResult {
  WeightOverrides overrides;  // the folded tensors (float32) that changed, by checkpoint name
  std::vector<AwqMapping> mappings;
};

// Steps done of all steps: one per calibration sequence run through the model, then one per
// mapping searched. Called after each step.
using AwqProgress = std::function<void(int64_t done, int64_t total)>;

// Searches and folds the scales of a dense Qwen3.5 checkpoint, `model_dir`, on float32 CPU. Every
// calibration sequence runs through the model once; sequences must be non-empty and their ids in
// the vocabulary.
absl::StatusOr<AwqResult> ComputeAwqOverrides(
    const std::filesystem::path& model_dir, const AwqOptions& options,
    const std::vector<std::vector<int32_t>>& calibration_ids, const AwqProgress& progress = {});

// Calibration sequences from a UTF-8 text file, tokenized with `model_dir`/tokenizer.json:
// consecutive pieces of `seq_len` tokens (the last one may be shorter), at most `samples` of them.
absl::StatusOr<std::vector<std::vector<int32_t>>> ReadCalibrationText(
    const std::filesystem::path& text_file, const std::filesystem::path& model_dir, int64_t seq_len,
    int64_t samples);

}  // namespace specd::quant
