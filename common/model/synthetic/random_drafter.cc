#include "common/model/synthetic/random_drafter.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/io/atomic_file.h"
#include "common/io/checkpoint_writer.h"
#include "nlohmann/json.hpp"

namespace specd::model {
namespace {

// A tensor to write: a Linear's weight [out, in] or an RMSNorm's [n].
struct Spec {
  std::string name;
  std::vector<int64_t> shape;
};

std::vector<Spec> DrafterSpecs(const io::DFlashDraftConfig& c) {
  const int64_t h = c.hidden_size;
  const int64_t q = c.num_attention_heads * c.head_dim;
  const int64_t kv = c.num_key_value_heads * c.head_dim;
  const auto taps = static_cast<int64_t>(c.target_layer_ids.size());
  std::vector<Spec> specs = {{"fc.weight", {h, taps * h}}, {"hidden_norm.weight", {h}}};
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = absl::StrCat("layers.", i, ".");
    for (Spec spec : std::vector<Spec>{{"input_layernorm.weight", {h}},
                                       {"self_attn.q_proj.weight", {q, h}},
                                       {"self_attn.k_proj.weight", {kv, h}},
                                       {"self_attn.v_proj.weight", {kv, h}},
                                       {"self_attn.o_proj.weight", {h, q}},
                                       {"self_attn.q_norm.weight", {c.head_dim}},
                                       {"self_attn.k_norm.weight", {c.head_dim}},
                                       {"post_attention_layernorm.weight", {h}},
                                       {"mlp.gate_proj.weight", {c.intermediate_size, h}},
                                       {"mlp.up_proj.weight", {c.intermediate_size, h}},
                                       {"mlp.down_proj.weight", {h, c.intermediate_size}}}) {
      specs.push_back({p + spec.name, spec.shape});
    }
  }
  specs.push_back({"norm.weight", {h}});
  return specs;
}

nlohmann::json ConfigJson(const io::DFlashDraftConfig& c) {
  return {
      {"architectures", {"DFlashDraftModel"}},
      {"model_type", "qwen3"},
      {"block_size", c.block_size},
      {"num_target_layers", c.num_target_layers},
      {"dflash_config",
       {{"mask_token_id", c.mask_token_id}, {"target_layer_ids", c.target_layer_ids}}},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"layer_types", std::vector<std::string>(c.num_hidden_layers, "full_attention")},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"head_dim", c.head_dim},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", c.rope_theta}}},
      {"max_position_embeddings", c.max_position_embeddings},
      {"use_sliding_window", c.sliding_window > 0},
      {"sliding_window", c.sliding_window > 0 ? nlohmann::json(c.sliding_window) : nullptr},
      {"tie_word_embeddings", true},
      {"torch_dtype", c.torch_dtype},
  };
}

}  // namespace

std::vector<int64_t> DFlashTargetLayerIds(int64_t num_target_layers, int64_t num_draft_layers) {
  if (num_draft_layers == 1) return {num_target_layers / 2};
  const double start = 1;
  const double span = static_cast<double>(num_target_layers - 3) - start;
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < num_draft_layers; ++i) {
    // nearbyint rounds half to even in the default rounding mode, as Python's round() does.
    ids.push_back(static_cast<int64_t>(std::nearbyint(
        start + static_cast<double>(i) * span / static_cast<double>(num_draft_layers - 1))));
  }
  return ids;
}

io::DFlashDraftConfig RandomDrafterConfig(const io::Qwen35TextConfig& target,
                                          const RandomDrafterOptions& options) {
  return {
      .architecture = "DFlashDraftModel",
      .block_size = options.block_size,
      .mask_token_id = options.mask_token_id >= 0 ? options.mask_token_id : target.vocab_size - 1,
      .num_target_layers = target.num_hidden_layers,
      .target_layer_ids = DFlashTargetLayerIds(target.num_hidden_layers, options.num_layers),
      .vocab_size = target.vocab_size,
      .hidden_size = target.hidden_size,
      .intermediate_size = target.intermediate_size,
      .num_hidden_layers = options.num_layers,
      .num_attention_heads = target.num_attention_heads,
      .num_key_value_heads = target.num_key_value_heads,
      .head_dim = target.head_dim,
      .rms_norm_eps = 1e-6,
      .rope_theta = target.rope_theta,
      .max_position_embeddings = target.max_position_embeddings,
      .sliding_window = options.window,
      .torch_dtype = "float32"};
}

absl::Status WriteRandomDFlashDrafter(const std::filesystem::path& dir,
                                      const io::Qwen35TextConfig& target,
                                      const RandomDrafterOptions& options) {
  if (options.num_layers < 1 || options.block_size < 2) {
    return absl::InvalidArgumentError(absl::StrCat("a drafter needs at least 1 layer and a block ",
                                                   "of 2; got ", options.num_layers, " layers, ",
                                                   "block ", options.block_size));
  }
  const io::DFlashDraftConfig config = RandomDrafterConfig(target, options);
  if (config.mask_token_id >= target.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("mask token ", config.mask_token_id,
                                                   " is outside the target's vocabulary of ",
                                                   target.vocab_size));
  }
  std::vector<at::Tensor> tensors;
  std::vector<io::TensorView> views;
  try {
    at::Generator generator = at::detail::createCPUGenerator(options.seed);
    for (const Spec& spec : DrafterSpecs(config)) {
      at::Tensor t = at::randn(spec.shape, generator, at::kFloat);
      // Norm weights near 1; projections that keep the activations' scale.
      t = spec.shape.size() == 1 ? t * 0.3 + 1.0
                                 : t / std::sqrt(static_cast<double>(spec.shape[1]));
      tensors.push_back(t.contiguous());
      views.push_back({.name = spec.name,
                       .dtype = io::DType::kF32,
                       .shape = spec.shape,
                       .bytes = {static_cast<const std::byte*>(tensors.back().data_ptr()),
                                 tensors.back().nbytes()},
                       .owner = nullptr});
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("random drafter weights: ", e.what_without_backtrace()));
  }
  if (absl::Status written = io::WriteCheckpointTensors(
          dir, views, std::numeric_limits<uint64_t>::max(), {{"format", "pt"}});
      !written.ok()) {
    return written;
  }
  return io::WriteFileAtomically(dir / "config.json", ConfigJson(config).dump(2) + "\n");
}

}  // namespace specd::model
