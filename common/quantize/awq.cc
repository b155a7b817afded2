#include "common/quantize/awq.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/io/checkpoint.h"
#include "common/io/qwen35_checkpoint_config.h"
#include "common/io/qwen35_config.h"
#include "common/model/linear_input_tap.h"
#include "common/model/qwen35_model.h"
#include "common/model/weight_reader.h"
#include "common/text/tokenizer.h"

namespace specd::quant {
namespace {

// How the smooth layer divides its output channels by s.
enum class Smooth {
  kZeroCentredNorm,  // y = x̂ · (1 + w): w' = (1 + w) / s − 1
  kLinearRows,       // output row c of a Linear is input channel c of the balance Linears
};

struct Mapping {
  std::string smooth;  // module name
  Smooth kind;
  std::vector<std::string> balance;     // the Linears whose quantization error is searched
  std::vector<std::string> compensate;  // read the same input but stay dense: multiplied by s
};

std::vector<Mapping> Qwen35Mappings(const io::Qwen35TextConfig& config) {
  std::vector<Mapping> mappings;
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    const std::string layer = absl::StrCat(config.tensor_prefix, "layers.", i, ".");
    if (config.layer_types[i] == io::LayerType::kLinearAttention) {
      const std::string p = layer + "linear_attn.";
      mappings.push_back({layer + "input_layernorm",
                          Smooth::kZeroCentredNorm,
                          {p + "in_proj_qkv", p + "in_proj_z"},
                          {p + "in_proj_a", p + "in_proj_b"}});
    } else {
      const std::string p = layer + "self_attn.";
      mappings.push_back({layer + "input_layernorm",
                          Smooth::kZeroCentredNorm,
                          {p + "q_proj", p + "k_proj", p + "v_proj"},
                          {}});
      // Attention mixes values across positions, never across channels, and the sigmoid gate
      // multiplies per channel: o_proj's input channel c is v_proj's output c, reweighted. With
      // GQA one value channel feeds several heads, so (as llm-compressor) no mapping then.
      if (config.num_attention_heads == config.num_key_value_heads) {
        mappings.push_back({p + "v_proj", Smooth::kLinearRows, {p + "o_proj"}, {}});
      }
    }
    const std::string mlp = layer + "mlp.";
    mappings.push_back({layer + "post_attention_layernorm",
                        Smooth::kZeroCentredNorm,
                        {mlp + "gate_proj", mlp + "up_proj"},
                        {}});
    // silu(gate) · up is linear in each channel of up. Dividing up_proj's rows after the search
    // above scaled its columns keeps that search valid: a min-max grid scales with its row.
    mappings.push_back({mlp + "up_proj", Smooth::kLinearRows, {mlp + "down_proj"}, {}});
  }
  return mappings;
}

// The activations that reach one mapping's balance Linears.
struct Activations {
  at::Tensor abs_sum;  // Σ|x| per channel over every token, float64
  int64_t tokens = 0;
  std::vector<at::Tensor> rows;  // the tokens kept for the loss
};

absl::Status CheckCalibration(const std::vector<std::vector<int32_t>>& ids, int64_t vocab_size) {
  if (ids.empty()) return absl::InvalidArgumentError("AWQ needs calibration sequences; none given");
  for (size_t s = 0; s < ids.size(); ++s) {
    if (ids[s].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("calibration sequence ", s, " is empty"));
    }
    for (size_t t = 0; t < ids[s].size(); ++t) {
      if (ids[s][t] < 0 || ids[s][t] >= vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("calibration sequence ", s, ", token ", t, ": id ", ids[s][t],
                         " is outside the model's vocabulary [0, ", vocab_size, ")"));
      }
    }
  }
  return absl::OkStatus();
}

// Runs every sequence through the dense model once, recording the input of each mapping's first
// balance Linear (the others read the same tensor).
absl::StatusOr<std::map<std::string, Activations>> Calibrate(
    const model::Qwen35Model& model, const std::vector<Mapping>& mappings,
    const std::vector<std::vector<int32_t>>& calibration_ids, int64_t max_loss_tokens,
    const std::function<void()>& step_done) {
  std::map<std::string, Activations> by_module;
  for (const Mapping& mapping : mappings) by_module[mapping.balance.front()];
  int64_t total = 0;
  for (const std::vector<int32_t>& sequence : calibration_ids) total += sequence.size();
  const int64_t stride = (total + max_loss_tokens - 1) / max_loss_tokens;

  int64_t seen = 0;
  for (const std::vector<int32_t>& sequence : calibration_ids) {
    const auto length = static_cast<int64_t>(sequence.size());
    std::vector<int64_t> kept;  // positions whose overall token index is a multiple of stride
    for (int64_t p = (stride - seen % stride) % stride; p < length; p += stride) kept.push_back(p);
    seen += length;
    const at::Tensor kept_rows = at::tensor(kept, at::kLong);
    model::LinearInputTap tap([&](const std::string& module, const at::Tensor& input) {
      const auto found = by_module.find(module);
      if (found == by_module.end()) return;
      Activations& activations = found->second;
      const at::Tensor x = input.reshape({-1, input.size(-1)}).to(at::kFloat);
      const at::Tensor abs_sum = x.abs().sum(0, /*keepdim=*/false, at::kDouble);
      activations.abs_sum = activations.abs_sum.defined() ? activations.abs_sum + abs_sum : abs_sum;
      activations.tokens += x.size(0);
      if (!kept.empty()) activations.rows.push_back(x.index_select(0, kept_rows));
    });
    absl::StatusOr<model::Qwen35Cache> cache = model.NewCache(length);
    if (!cache.ok()) return cache.status();
    const std::vector<int64_t> ids(sequence.begin(), sequence.end());
    if (absl::StatusOr<model::ForwardOutput> output = model.Prefill(ids, *cache); !output.ok()) {
      return output.status();
    }
    step_done();
  }
  for (const auto& [module, activations] : by_module) {
    if (activations.tokens != total) {
      return absl::InternalError(absl::StrCat("the calibration forward fed ", activations.tokens,
                                              " of ", total, " tokens to ", module));
    }
  }
  return by_module;
}

// The tensors as folded so far: overrides first, then the checkpoint's, as float32.
class FoldedWeights {
 public:
  explicit FoldedWeights(const io::Checkpoint& checkpoint) : checkpoint_(checkpoint) {}

  absl::StatusOr<at::Tensor> Get(const std::string& name) const {
    if (const auto found = overrides_.find(name); found != overrides_.end()) return found->second;
    absl::StatusOr<const io::TensorView*> view = checkpoint_.Get(name);
    if (!view.ok()) return view.status();
    return model::TensorFromView(**view, at::kFloat, at::kCPU);
  }
  // The dtype the checkpoint stores `name` in (the model loaded it, so it exists).
  io::DType StoredDType(const std::string& name) const { return checkpoint_.Find(name)->dtype; }
  void Set(const std::string& name, at::Tensor tensor) {
    overrides_.insert_or_assign(name, std::move(tensor));
  }
  WeightOverrides Release() && { return std::move(overrides_); }

 private:
  const io::Checkpoint& checkpoint_;
  WeightOverrides overrides_;
};

// W [rows, cols] rounded onto its min-max grid and back to float32: what RTN makes of it.
absl::StatusOr<at::Tensor> FakeQuantize(const at::Tensor& weight, const RtnOptions& options) {
  const at::Tensor w = weight.contiguous();
  const int64_t rows = w.size(0), cols = w.size(1);
  absl::StatusOr<PackedInt4Weight> packed =
      QuantizeRtn(std::span<const float>(w.data_ptr<float>(), w.numel()), rows, cols, options);
  if (!packed.ok()) return packed.status();
  return at::tensor(Dequantize(*packed)).view({rows, cols});
}

// Per input channel, the mean over rows of |W| normalised to the largest |w| of its quantization
// group: how much of the grid the channel's weights already use.
at::Tensor NormalisedWeightMean(const std::vector<at::Tensor>& weights, int64_t group_size) {
  const at::Tensor w = at::cat(weights, 0).abs();
  const at::Tensor groups = w.view({-1, group_size == 0 ? w.size(1) : group_size});
  return (groups / (groups.amax(1, /*keepdim=*/true) + 1e-6)).view(w.sizes()).mean(0);
}

at::Tensor CandidateScale(const at::Tensor& x_mean, const at::Tensor& w_mean, double ratio,
                          bool duo_scaling) {
  at::Tensor s =
      duo_scaling ? x_mean.pow(ratio) / (w_mean.pow(1 - ratio) + 1e-4) : x_mean.pow(ratio);
  s = s.clamp_min(1e-4);
  // Centred on 1 in log space, so the fold does not drift the smooth layer's magnitude.
  s = s / (s.max() * s.min()).sqrt();
  return at::where(at::isfinite(s), s, at::ones_like(s));
}

struct Balance {
  std::string name;
  at::Tensor weight;        // [out, in]
  at::Tensor dense_output;  // x Wᵀ on the kept calibration rows
  RtnOptions rtn;
};

// Mean squared error of the balance outputs when W·s is quantized and the input divided by s.
absl::StatusOr<double> QuantizedError(const at::Tensor& x, const std::vector<Balance>& balance,
                                      const at::Tensor& s) {
  const at::Tensor scaled_x = x / s;
  double squared = 0;
  int64_t count = 0;
  for (const Balance& b : balance) {
    absl::StatusOr<at::Tensor> quantized = FakeQuantize(b.weight * s, b.rtn);
    if (!quantized.ok()) {
      return absl::Status(quantized.status().code(),
                          absl::StrCat(b.name, ": ", quantized.status().message()));
    }
    squared += (at::matmul(scaled_x, quantized->t()) - b.dense_output)
                   .square()
                   .sum(at::kDouble)
                   .item<double>();
    count += b.dense_output.numel();
  }
  return squared / static_cast<double>(count);
}

// Searches one mapping's scale and, unless s = 1 wins, folds it into `weights`.
absl::StatusOr<AwqMapping> SearchAndFold(const Mapping& mapping, const Activations& activations,
                                         const AwqOptions& options, FoldedWeights& weights) {
  AwqMapping result{.smooth = mapping.smooth,
                    .balance = mapping.balance,
                    .ratio = std::nullopt,
                    .rtn_error = 0,
                    .awq_error = 0};
  const at::Tensor x = at::cat(activations.rows, 0);
  std::vector<Balance> balance;
  std::vector<at::Tensor> balance_weights;
  for (const std::string& name : mapping.balance) {
    absl::StatusOr<at::Tensor> weight = weights.Get(name + ".weight");
    if (!weight.ok()) return weight.status();
    // As QuantizeCheckpoint writes them: scales in the dtype of the weight they scale.
    RtnOptions rtn = options.rtn;
    rtn.scale_dtype = weights.StoredDType(name + ".weight");
    balance.push_back({name, *weight, at::matmul(x, weight->t()), rtn});
    balance_weights.push_back(*weight);
  }
  const at::Tensor x_mean = (activations.abs_sum / activations.tokens).to(at::kFloat);

  // s = 1 first (which also checks the grid fits): ties keep plain RTN, so AWQ never does worse
  // on the calibration data.
  at::Tensor best_scale = at::ones_like(x_mean);
  absl::StatusOr<double> rtn_error = QuantizedError(x, balance, best_scale);
  if (!rtn_error.ok()) return rtn_error.status();
  result.rtn_error = result.awq_error = *rtn_error;
  const at::Tensor w_mean = NormalisedWeightMean(balance_weights, options.rtn.group_size);
  for (int64_t step = 0; step < options.grid_points; ++step) {
    const double ratio = static_cast<double>(step) / static_cast<double>(options.grid_points);
    const at::Tensor s = CandidateScale(x_mean, w_mean, ratio, options.duo_scaling);
    absl::StatusOr<double> error = QuantizedError(x, balance, s);
    if (!error.ok()) return error.status();
    if (*error < result.awq_error) {
      result.awq_error = *error;
      result.ratio = ratio;
      best_scale = s;
    }
  }
  if (!result.ratio.has_value()) return result;

  for (const auto* names : {&mapping.balance, &mapping.compensate}) {
    for (const std::string& name : *names) {
      absl::StatusOr<at::Tensor> weight = weights.Get(name + ".weight");
      if (!weight.ok()) return weight.status();
      weights.Set(name + ".weight", *weight * best_scale);
    }
  }
  const std::string smooth_name = mapping.smooth + ".weight";
  absl::StatusOr<at::Tensor> smooth = weights.Get(smooth_name);
  if (!smooth.ok()) return smooth.status();
  weights.Set(smooth_name, mapping.kind == Smooth::kZeroCentredNorm
                               ? (*smooth + 1.0) / best_scale - 1.0
                               : *smooth / best_scale.unsqueeze(1));
  return result;
}

absl::StatusOr<AwqResult> RunAwq(const std::filesystem::path& model_dir, const AwqOptions& options,
                                 const std::vector<std::vector<int32_t>>& calibration_ids,
                                 const AwqProgress& progress) {
  absl::StatusOr<io::Qwen35CheckpointConfig> checkpoint_config =
      io::ReadQwen35CheckpointConfig(model_dir);
  if (!checkpoint_config.ok()) return checkpoint_config.status();
  const io::Qwen35TextConfig& config = checkpoint_config->text;
  if (checkpoint_config->quantization.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat(model_dir.string(), " is already quantized; AWQ needs the dense checkpoint"));
  }
  if (absl::Status valid = CheckCalibration(calibration_ids, config.vocab_size); !valid.ok()) {
    return valid;
  }
  absl::StatusOr<io::Checkpoint> checkpoint = io::Checkpoint::Open(model_dir);
  if (!checkpoint.ok()) return checkpoint.status();
  absl::StatusOr<model::Qwen35Model> model = model::Qwen35Model::Load(config, *checkpoint);
  if (!model.ok()) return model.status();

  const std::vector<Mapping> mappings = Qwen35Mappings(config);
  const auto steps = static_cast<int64_t>(calibration_ids.size() + mappings.size());
  int64_t done = 0;
  const auto step_done = [&] {
    if (progress) progress(++done, steps);
  };
  absl::StatusOr<std::map<std::string, Activations>> activations =
      Calibrate(*model, mappings, calibration_ids, options.max_loss_tokens, step_done);
  if (!activations.ok()) return activations.status();

  // Every mapping's activations are those of the original model: a fold changes only the input
  // of its own balance Linears, and leaves what they compute unchanged.
  FoldedWeights weights(*checkpoint);
  AwqResult result;
  for (const Mapping& mapping : mappings) {
    absl::StatusOr<AwqMapping> searched =
        SearchAndFold(mapping, activations->at(mapping.balance.front()), options, weights);
    if (!searched.ok()) return searched.status();
    result.mappings.push_back(*std::move(searched));
    step_done();
  }
  result.overrides = std::move(weights).Release();
  return result;
}

}  // namespace

absl::StatusOr<AwqResult> ComputeAwqOverrides(
    const std::filesystem::path& model_dir, const AwqOptions& options,
    const std::vector<std::vector<int32_t>>& calibration_ids, const AwqProgress& progress) {
  if (options.grid_points < 1 || options.max_loss_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("AWQ needs at least one grid point and one loss token, got ",
                     options.grid_points, " and ", options.max_loss_tokens));
  }
  try {
    return RunAwq(model_dir, options, calibration_ids, progress);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("AWQ: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<std::vector<std::vector<int32_t>>> ReadCalibrationText(
    const std::filesystem::path& text_file, const std::filesystem::path& model_dir, int64_t seq_len,
    int64_t samples) {
  if (seq_len < 1 || samples < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibration needs a positive sequence length and sample count, got ", seq_len,
                     " and ", samples));
  }
  std::ifstream file(text_file, std::ios::binary);
  if (!file) {
    return absl::NotFoundError(absl::StrCat("cannot open calibration text ", text_file.string()));
  }
  const std::string text{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  if (file.bad()) {
    return absl::DataLossError(absl::StrCat("cannot read calibration text ", text_file.string()));
  }
  if (text.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibration text ", text_file.string(), " is empty"));
  }
  absl::StatusOr<text::Tokenizer> tokenizer =
      text::Tokenizer::FromFile(model_dir / "tokenizer.json");
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        absl::StrCat("calibration text needs the model's tokenizer: ",
                                     tokenizer.status().message()));
  }
  absl::StatusOr<std::vector<text::TokenId>> ids = tokenizer->Encode(text);
  if (!ids.ok()) {
    return absl::Status(ids.status().code(),
                        absl::StrCat(text_file.string(), ": ", ids.status().message()));
  }
  std::vector<std::vector<int32_t>> sequences;
  for (size_t begin = 0; begin < ids->size() && static_cast<int64_t>(sequences.size()) < samples;
       begin += seq_len) {
    const size_t end = std::min(ids->size(), begin + static_cast<size_t>(seq_len));
    sequences.emplace_back(ids->begin() + begin, ids->begin() + end);
  }
  return sequences;
}

}  // namespace specd::quant
