#include "common/model/synthetic/random_checkpoint.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <deque>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/int4/pack_quantized_io.h"
#include "common/int4/rtn.h"
#include "common/io/checkpoint_writer.h"
#include "common/io/quantization_config.h"
#include "common/model/quantized_module_matcher.h"
#include "nlohmann/json.hpp"

namespace specd::model {
namespace {

enum class Init { kMatrix, kEmbedding, kZeroCentredNorm, kPlainNorm, kConv, kALog, kDtBias };

struct Spec {
  std::string name;  // without the text model's prefix
  std::vector<int64_t> shape;
  Init init;
};

std::vector<Spec> TextModelSpecs(const io::Qwen35TextConfig& c) {
  const int64_t h = c.hidden_size;
  std::vector<Spec> specs{{"embed_tokens.weight", {c.vocab_size, h}, Init::kEmbedding}};
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string layer = absl::StrCat("layers.", i, ".");
    specs.push_back({layer + "input_layernorm.weight", {h}, Init::kZeroCentredNorm});
    if (c.layer_types[i] == io::LayerType::kLinearAttention) {
      const std::string p = layer + "linear_attn.";
      const int64_t key_width = c.linear_num_key_heads * c.linear_key_head_dim;
      const int64_t value_width = c.linear_num_value_heads * c.linear_value_head_dim;
      const int64_t channels = 2 * key_width + value_width;
      const int64_t vh = c.linear_num_value_heads;
      specs.push_back({p + "in_proj_qkv.weight", {channels, h}, Init::kMatrix});
      specs.push_back({p + "in_proj_z.weight", {value_width, h}, Init::kMatrix});
      specs.push_back({p + "in_proj_b.weight", {vh, h}, Init::kMatrix});
      specs.push_back({p + "in_proj_a.weight", {vh, h}, Init::kMatrix});
      specs.push_back({p + "conv1d.weight", {channels, 1, c.linear_conv_kernel_dim}, Init::kConv});
      specs.push_back({p + "A_log", {vh}, Init::kALog});
      specs.push_back({p + "dt_bias", {vh}, Init::kDtBias});
      specs.push_back({p + "norm.weight", {c.linear_value_head_dim}, Init::kPlainNorm});
      specs.push_back({p + "out_proj.weight", {h, value_width}, Init::kMatrix});
    } else {
      const std::string p = layer + "self_attn.";
      const int64_t d = c.head_dim;
      specs.push_back({p + "q_proj.weight", {2 * c.num_attention_heads * d, h}, Init::kMatrix});
      specs.push_back({p + "k_proj.weight", {c.num_key_value_heads * d, h}, Init::kMatrix});
      specs.push_back({p + "v_proj.weight", {c.num_key_value_heads * d, h}, Init::kMatrix});
      specs.push_back({p + "o_proj.weight", {h, c.num_attention_heads * d}, Init::kMatrix});
      specs.push_back({p + "q_norm.weight", {d}, Init::kZeroCentredNorm});
      specs.push_back({p + "k_norm.weight", {d}, Init::kZeroCentredNorm});
    }
    specs.push_back({layer + "post_attention_layernorm.weight", {h}, Init::kZeroCentredNorm});
    specs.push_back({layer + "mlp.gate_proj.weight", {c.intermediate_size, h}, Init::kMatrix});
    specs.push_back({layer + "mlp.up_proj.weight", {c.intermediate_size, h}, Init::kMatrix});
    specs.push_back({layer + "mlp.down_proj.weight", {h, c.intermediate_size}, Init::kMatrix});
  }
  specs.push_back({"norm.weight", {h}, Init::kZeroCentredNorm});
  return specs;
}

// What training from scratch starts from, as transformers initialises Qwen3.5: weights
// normal(0, 0.02), every norm the identity, decay rates log-uniform in [1, 16], dt_bias 1.
at::Tensor TrainingStartTensor(const Spec& spec, at::Generator& generator) {
  switch (spec.init) {
    case Init::kMatrix:
    case Init::kEmbedding:
    case Init::kConv:
      return at::randn(spec.shape, generator, at::kFloat) * 0.02;
    case Init::kZeroCentredNorm:
      return at::zeros(spec.shape, at::kFloat);
    case Init::kPlainNorm:
    case Init::kDtBias:
      return at::ones(spec.shape, at::kFloat);
    case Init::kALog:
      return at::log(at::rand(spec.shape, generator, at::kFloat) * 15.0 + 1.0);
  }
  return at::Tensor();
}

at::Tensor RandomTensor(const Spec& spec, at::Generator& generator, bool training_start) {
  if (training_start) return TrainingStartTensor(spec, generator);
  const auto randn = [&] { return at::randn(spec.shape, generator, at::kFloat); };
  switch (spec.init) {
    case Init::kMatrix:
      return randn() * (1.5 / std::sqrt(static_cast<double>(spec.shape[1])));
    case Init::kEmbedding:
      return randn();
    case Init::kZeroCentredNorm:
      return randn() * 0.3;
    case Init::kPlainNorm:
      return randn() * 0.3 + 1.0;
    case Init::kConv:
      return randn() * 0.4;
    case Init::kALog:
      return at::rand(spec.shape, generator, at::kFloat) * std::log(16.0);
    case Init::kDtBias:
      return randn() * 0.5;
  }
  return at::Tensor();
}

nlohmann::json TextConfigJson(const io::Qwen35TextConfig& c, io::DType dtype) {
  nlohmann::json layer_types = nlohmann::json::array();
  for (const io::LayerType type : c.layer_types) layer_types.push_back(io::LayerTypeName(type));
  return {
      {"architectures", {"Qwen3_5ForCausalLM"}},
      {"model_type", "qwen3_5_text"},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"layer_types", layer_types},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"head_dim", c.head_dim},
      {"linear_num_key_heads", c.linear_num_key_heads},
      {"linear_num_value_heads", c.linear_num_value_heads},
      {"linear_key_head_dim", c.linear_key_head_dim},
      {"linear_value_head_dim", c.linear_value_head_dim},
      {"linear_conv_kernel_dim", c.linear_conv_kernel_dim},
      {"hidden_act", "silu"},
      {"rms_norm_eps", c.rms_norm_eps},
      {"max_position_embeddings", c.max_position_embeddings},
      {"rope_parameters",
       {{"rope_type", "default"},
        {"rope_theta", c.rope_theta},
        {"partial_rotary_factor", c.partial_rotary_factor}}},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"eos_token_id", c.eos_token_ids},
      {"torch_dtype", dtype == io::DType::kBF16 ? "bfloat16" : "float32"},
  };
}

// The Linears a quantization_config block covers, and how their weights are rounded.
struct Quantization {
  QuantizedModuleMatcher linears;
  quant::RtnOptions rtn;
};

absl::StatusOr<std::optional<Quantization>> ParseQuantization(const nlohmann::json& block,
                                                              io::DType scale_dtype) {
  if (block.is_null()) return std::nullopt;
  absl::StatusOr<std::optional<io::QuantizationConfig>> config =
      io::ParseQuantizationConfig({{"quantization_config", block}}, "quantization_config");
  if (!config.ok()) return config.status();
  absl::StatusOr<QuantizedModuleMatcher> linears = QuantizedModuleMatcher::FromConfig(*config);
  if (!linears.ok()) return linears.status();
  for (const io::QuantizationGroup& group : (*config)->groups) {
    if (!group.weights.has_value()) continue;
    const io::QuantizationArgs& weights = *group.weights;
    if (weights.strategy != "group" && weights.strategy != "channel") {
      return absl::UnimplementedError(
          absl::StrCat("quantization_config: strategy \"", weights.strategy, "\" is not RTN's"));
    }
    return Quantization{
        .linears = *std::move(linears),
        .rtn = {.group_size = weights.strategy == "channel" ? 0 : weights.group_size.value_or(0),
                .symmetric = weights.symmetric,
                .scale_dtype = scale_dtype}};
  }
  return absl::InvalidArgumentError("quantization_config: no config group quantizes weights");
}

}  // namespace

absl::Status WriteRandomQwen35Checkpoint(const std::filesystem::path& dir,
                                         const io::Qwen35TextConfig& config,
                                         const RandomCheckpointOptions& options) {
  if (options.dtype != io::DType::kF32 && options.dtype != io::DType::kBF16) {
    return absl::InvalidArgumentError("random checkpoints are float32 or bfloat16");
  }
  const bool wrapped = options.layout == CheckpointLayout::kConditionalGeneration;
  const std::string prefix = wrapped ? "model.language_model." : "model.";
  std::vector<Spec> specs = TextModelSpecs(config);
  for (Spec& spec : specs) spec.name = prefix + spec.name;
  if (!config.tie_word_embeddings) {
    specs.push_back({"lm_head.weight", {config.vocab_size, config.hidden_size}, Init::kMatrix});
  }
  if (wrapped) {
    specs.push_back({"model.visual.patch_embed.proj.weight", {8, 3, 2, 2}, Init::kConv});
    specs.push_back({"mtp.fc.weight", {config.hidden_size, 2 * config.hidden_size}, Init::kMatrix});
  }

  absl::StatusOr<std::optional<Quantization>> quantization =
      ParseQuantization(options.quantization_config, options.dtype);
  if (!quantization.ok()) return quantization.status();

  std::vector<at::Tensor> tensors;
  std::deque<quant::OwnedTensor> packed;  // a deque: the views keep pointing into its elements
  std::vector<io::TensorView> views;
  try {
    at::Generator generator = at::detail::createCPUGenerator(options.seed);
    for (const Spec& spec : specs) {
      const bool bf16 = options.dtype == io::DType::kBF16 && spec.init != Init::kALog;
      const at::Tensor t = RandomTensor(spec, generator, options.training_start)
                               .to(bf16 ? at::kBFloat16 : at::kFloat)
                               .contiguous();
      const std::string module = spec.name.substr(0, spec.name.rfind(".weight"));
      if (quantization->has_value() && spec.init == Init::kMatrix &&
          (*quantization)->linears.Contains(module)) {
        // The dense weight as it would have been stored, rounded as quantizing it would.
        const at::Tensor values = t.to(at::kFloat).contiguous();
        absl::StatusOr<quant::PackedInt4Weight> weight =
            quant::QuantizeRtn({values.data_ptr<float>(), static_cast<size_t>(values.numel())},
                               spec.shape[0], spec.shape[1], (*quantization)->rtn);
        if (!weight.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat(spec.name, ": ", weight.status().message()));
        }
        for (quant::OwnedTensor& tensor : quant::PackQuantizedTensors(*weight, module)) {
          packed.push_back(std::move(tensor));
          views.push_back(packed.back().View());
        }
        continue;
      }
      tensors.push_back(t);
      views.push_back({.name = spec.name,
                       .dtype = bf16 ? io::DType::kBF16 : io::DType::kF32,
                       .shape = spec.shape,
                       .bytes = {static_cast<const std::byte*>(t.data_ptr()), t.nbytes()},
                       .owner = nullptr});
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("random weights: ", e.what_without_backtrace()));
  }
  if (absl::Status status =
          io::WriteCheckpointTensors(dir, views, options.max_shard_bytes, {{"format", "pt"}});
      !status.ok()) {
    return status;
  }

  nlohmann::json json = TextConfigJson(config, options.dtype);
  if (wrapped) {
    json = {{"architectures", {"Qwen3_5ForConditionalGeneration"}},
            {"model_type", "qwen3_5"},
            {"tie_word_embeddings", config.tie_word_embeddings},
            {"text_config", json}};
  }
  if (quantization->has_value()) json["quantization_config"] = options.quantization_config;
  std::ofstream file(dir / "config.json");
  file << json.dump(2) << "\n";
  if (!file.good())
    return absl::InternalError(absl::StrCat("cannot write ", dir.string(), "/config.json"));
  return absl::OkStatus();
}

}  // namespace specd::model
