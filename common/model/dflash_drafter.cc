#include "common/model/dflash_drafter.h"

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/torch_errors.h"
#include "common/io/checkpoint.h"
#include "common/io/json_file.h"
#include "common/io/quantization_config.h"
#include "common/model/quantized_module_matcher.h"
#include "common/model/step_graphs.h"
#include "common/model/weight_reader.h"
#include "nlohmann/json.hpp"

namespace specd::model {

using base::CatchTorchErrors;

namespace {

constexpr char kArchitecture[] = "DFlashDraftModel";

// Newer z-lab drafters may declare causal sliding-window layers, which this drafter does not
// compute; refusing them beats drafting from a different function.
absl::Status CheckFullAttentionOnly(const nlohmann::json& config, const std::string& source) {
  const auto layer_types = config.find("layer_types");
  if (layer_types == config.end() || !layer_types->is_array()) return absl::OkStatus();
  for (const nlohmann::json& type : *layer_types) {
    if (type != "full_attention") {
      return absl::UnimplementedError(absl::StrCat(source, ": layer_types: ", type.dump(),
                                                   " layers are not supported (only "
                                                   "\"full_attention\")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<QuantizedModuleMatcher> ReadQuantizedModules(const nlohmann::json& config,
                                                            const std::string& source) {
  absl::StatusOr<std::optional<io::QuantizationConfig>> quantization =
      io::ParseQuantizationConfig(config, source);
  if (!quantization.ok()) return quantization.status();
  return QuantizedModuleMatcher::FromConfig(*quantization);
}

std::string ShapeString(const at::Tensor& tensor) {
  if (!tensor.defined()) return "undefined";
  return absl::StrCat("[", absl::StrJoin(tensor.sizes(), ", "), "]");
}

// The target ids of a pruned head: EAGLE-3's `d2t` int64 [draft_vocab_size], where draft id i
// is target id i + d2t[i], so ascending ids within the vocabulary.
absl::StatusOr<at::Tensor> ReadDraftVocab(const io::Checkpoint& checkpoint,
                                          const io::DFlashDraftConfig& config) {
  absl::StatusOr<const io::TensorView*> d2t = checkpoint.Get("d2t");
  if (!d2t.ok()) return d2t.status();
  const io::TensorView& view = **d2t;
  if (view.dtype != io::DType::kI64 ||
      view.shape != std::vector<int64_t>{config.draft_vocab_size}) {
    return absl::InvalidArgumentError(
        absl::StrCat("d2t must be I64 [", config.draft_vocab_size, "] (draft_vocab_size)"));
  }
  const at::Tensor offsets =
      at::from_blob(const_cast<std::byte*>(view.bytes.data()), {view.shape[0]}, at::kLong);
  const at::Tensor ids = offsets + at::arange(view.shape[0], at::kLong);
  const bool ascending = view.shape[0] < 2 || (ids.diff() > 0).all().item<bool>();
  if (!ascending || ids[0].item<int64_t>() < 0 || ids[-1].item<int64_t>() >= config.vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("d2t must name ascending ids within the vocabulary of ", config.vocab_size));
  }
  return ids;
}

}  // namespace

absl::StatusOr<DFlashDrafter> DFlashDrafter::Load(const std::filesystem::path& dir,
                                                  const ModelOptions& options) {
  const std::filesystem::path config_path = dir / "config.json";
  const std::string source = config_path.string();
  absl::StatusOr<nlohmann::json> json = io::ReadJsonFile(config_path);
  if (!json.ok()) return json.status();
  absl::StatusOr<io::DFlashDraftConfig> config = io::ParseDFlashDraftConfig(*json, source);
  if (!config.ok()) return config.status();
  if (!config->architecture.empty() && config->architecture != kArchitecture) {
    return absl::UnimplementedError(absl::StrCat(source, ": architecture \"", config->architecture,
                                                 "\" is not ", kArchitecture));
  }
  if (config->num_attention_heads % config->num_key_value_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": attention heads must be a multiple of key/value heads"));
  }
  if (absl::Status layers = CheckFullAttentionOnly(*json, source); !layers.ok()) return layers;
  // A quantized drafter says so in its own config.json, whatever the target's says.
  absl::StatusOr<QuantizedModuleMatcher> quantized = ReadQuantizedModules(*json, source);
  if (!quantized.ok()) return quantized.status();
  absl::StatusOr<io::Checkpoint> checkpoint = io::Checkpoint::Open(dir);
  if (!checkpoint.ok()) return checkpoint.status();

  return CatchTorchErrors("loading the DFlash drafter", [&]() -> absl::StatusOr<DFlashDrafter> {
    DFlashDrafter drafter;
    drafter.config_ = *config;
    drafter.options_ = options;
    WeightReader reader(*checkpoint, "", options, *quantized);
    const int64_t hidden = config->hidden_size;
    const int64_t taps = static_cast<int64_t>(config->target_layer_ids.size());
    const double eps = config->rms_norm_eps;
    drafter.fc_ = reader.Projection("fc", hidden, taps * hidden);
    drafter.hidden_norm_ = PlainRmsNorm(reader.Float32("hidden_norm.weight", {hidden}), eps);
    for (int64_t i = 0; i < config->num_hidden_layers; ++i) {
      const std::string prefix = absl::StrCat("layers.", i, ".");
      const int64_t inner = config->intermediate_size;
      drafter.layers_.push_back({
          .input_layernorm =
              PlainRmsNorm(reader.Float32(prefix + "input_layernorm.weight", {hidden}), eps),
          .self_attn = DFlashAttention::Load(reader, *config, prefix + "self_attn."),
          .post_attention_layernorm = PlainRmsNorm(
              reader.Float32(prefix + "post_attention_layernorm.weight", {hidden}), eps),
          .mlp = {.gate_proj = reader.Projection(prefix + "mlp.gate_proj", inner, hidden),
                  .up_proj = reader.Projection(prefix + "mlp.up_proj", inner, hidden),
                  .down_proj = reader.Projection(prefix + "mlp.down_proj", hidden, inner)},
      });
    }
    drafter.norm_ = PlainRmsNorm(reader.Float32("norm.weight", {hidden}), eps);
    if (!reader.status().ok()) return reader.status();
    if (config->draft_vocab_size > 0) {
      absl::StatusOr<at::Tensor> vocab = ReadDraftVocab(*checkpoint, *config);
      if (!vocab.ok()) return vocab.status();
      drafter.draft_vocab_ = *std::move(vocab);
    }
    drafter.parameters_ = reader.parameters();
    // Qwen3 rotates whole heads.
    drafter.rotary_ = RotaryEmbedding(config->head_dim, config->rope_theta, options);
    if (options.cuda_graphs) drafter.step_graphs_ = std::make_shared<StepGraphs>();
    return drafter;
  });
}

absl::Status DFlashDrafter::CheckTarget(const io::Qwen35TextConfig& target) const {
  if (target.hidden_size != config_.hidden_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("the drafter's hidden size ", config_.hidden_size,
                     " differs from the target's ", target.hidden_size));
  }
  // The tapped layer ids only mean the same layers on a target of the depth trained against.
  if (target.num_hidden_layers != config_.num_target_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("the drafter was made for a target of ", config_.num_target_layers,
                     " layers; this target has ", target.num_hidden_layers));
  }
  if (config_.mask_token_id >= target.vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("the drafter's mask token ", config_.mask_token_id,
                     " is outside the target's vocabulary of ", target.vocab_size));
  }
  return absl::OkStatus();
}

std::vector<int64_t> DFlashDrafter::TargetHiddenStates() const {
  std::vector<int64_t> indices;
  for (const int64_t layer : config_.target_layer_ids) indices.push_back(layer + 1);
  return indices;
}

CacheFootprint DFlashDrafter::SequenceFootprint() const {
  CacheFootprint footprint;
  for (const Layer& layer : layers_)
    footprint = footprint + layer.self_attn.SequenceFootprint(options_);
  return footprint;
}

absl::StatusOr<DFlashCache> DFlashDrafter::NewCache(int64_t max_length) const {
  if (max_length <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("drafter cache length ", max_length, " is not positive"));
  }
  return CatchTorchErrors("allocating a drafter cache", [&]() -> absl::StatusOr<DFlashCache> {
    std::vector<KvCache> layers;
    layers.reserve(layers_.size());
    for (const Layer& layer : layers_)
      layers.push_back(layer.self_attn.NewCache(max_length, options_));
    return DFlashCache(std::move(layers), max_length);
  });
}

absl::Status DFlashDrafter::CheckCache(const DFlashCache& cache) const {
  if (cache.num_layers() != layers_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the cache has ", cache.num_layers(),
                                                   " layers; this drafter has ", layers_.size()));
  }
  return absl::OkStatus();
}

absl::Status DFlashDrafter::AppendContext(const at::Tensor& target_hidden,
                                          DFlashCache& cache) const {
  const ContextInput input{.target_hidden = target_hidden, .cache = &cache};
  return AppendContexts({&input, 1});
}

absl::Status DFlashDrafter::AppendContexts(std::span<const ContextInput> batch) const {
  ForwardContext sequences;
  std::vector<DFlashCache*> appended;  // the caches that take rows, in row order
  std::vector<at::Tensor> features;
  for (size_t i = 0; i < batch.size(); ++i) {
    const ContextInput& input = batch[i];
    if (input.cache == nullptr) return absl::InvalidArgumentError("a context has no cache");
    const DFlashCache& cache = *input.cache;
    if (absl::Status status = CheckCache(cache); !status.ok()) return status;
    const at::Tensor& hidden = input.target_hidden;
    if (!hidden.defined() || hidden.dim() != 2 || hidden.size(1) != fc_.in_features()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "context features must be [n, ", fc_.in_features(), "], got ", ShapeString(hidden)));
    }
    const int64_t count = hidden.size(0);
    if (cache.length() + count > cache.max_length()) {
      return absl::OutOfRangeError(absl::StrCat("drafter cache holds ", cache.length(), " of ",
                                                cache.max_length(), " positions; ", count,
                                                " more do not fit"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (batch[j].cache == input.cache) {
        return absl::InvalidArgumentError("two contexts of one batch share a cache");
      }
    }
    if (count == 0) continue;
    sequences.Add(count, cache.length());
    appended.push_back(input.cache);
    features.push_back(hidden);
  }
  if (appended.empty()) return absl::OkStatus();
  return CatchTorchErrors("DFlash context projection", [&]() -> absl::Status {
    sequences.angles = rotary_.Angles(at::tensor(sequences.Positions(), at::kLong));
    const at::Tensor rows = features.size() == 1 ? features.front() : at::cat(features, 0);
    const at::Tensor context =
        hidden_norm_.Forward(fc_.Forward(rows.to(options_.device, options_.dtype)));
    std::vector<KvCache*> caches(appended.size());
    for (size_t i = 0; i < layers_.size(); ++i) {
      for (size_t s = 0; s < appended.size(); ++s) caches[s] = &appended[s]->layer(i);
      layers_[i].self_attn.AppendContext(context, caches, sequences);
    }
    for (size_t s = 0; s < appended.size(); ++s) {
      appended[s]->Append(sequences.sequences[s].length);
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<at::Tensor> DFlashDrafter::DraftBlock(const at::Tensor& block_embeddings,
                                                     const DFlashCache& cache,
                                                     const DraftOptions& options) const {
  const BlockInput input{.embeddings = block_embeddings, .cache = &cache, .options = options};
  return DraftBlocks({&input, 1});
}

absl::StatusOr<at::Tensor> DFlashDrafter::DraftBlocks(std::span<const BlockInput> batch) const {
  if (batch.empty()) return absl::InvalidArgumentError("an empty batch of blocks");
  ForwardContext blocks;
  std::vector<int64_t> windows;
  std::vector<at::Tensor> embeddings;
  for (const BlockInput& input : batch) {
    if (input.cache == nullptr) return absl::InvalidArgumentError("a block has no cache");
    if (absl::Status status = CheckCache(*input.cache); !status.ok()) return status;
    const at::Tensor& block = input.embeddings;
    if (!block.defined() || block.dim() != 2 || block.size(0) == 0 ||
        block.size(1) != config_.hidden_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "block embeddings must be [B ≥ 1, ", config_.hidden_size, "], got ", ShapeString(block)));
    }
    if (input.options.window < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("attention window ", input.options.window, " is negative"));
    }
    blocks.Add(block.size(0), input.cache->length());
    windows.push_back(input.options.window);
    embeddings.push_back(block);
  }
  return CatchTorchErrors("DFlash draft block", [&]() -> absl::StatusOr<at::Tensor> {
    blocks.angles = rotary_.Angles(at::tensor(blocks.Positions(), at::kLong));
    const at::Tensor h = (embeddings.size() == 1 ? embeddings.front() : at::cat(embeddings, 0))
                             .to(options_.device, options_.dtype);
    if (step_graphs_ == nullptr) return RunBlocks(batch, blocks, windows, h);
    // Through a CUDA graph (ModelOptions::cuda_graphs), as Qwen35Model's decode steps go.
    std::vector<uint64_t> caches;
    for (const BlockInput& input : batch) caches.push_back(input.cache->id());
    return step_graphs_
        ->Run(caches, windows, blocks.GraphInputs(h, options_.device),
              [&](std::span<const at::Tensor> step) {
                return std::vector<at::Tensor>{
                    RunBlocks(batch, blocks.Replaying(step), windows, step[0])};
              })
        .front()
        .clone();  // the graph's own memory otherwise
  });
}

at::Tensor DFlashDrafter::RunBlocks(std::span<const BlockInput> batch, const ForwardContext& blocks,
                                    std::span<const int64_t> windows, at::Tensor h) const {
  std::vector<const KvCache*> caches(batch.size());
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& layer = layers_[i];
    for (size_t s = 0; s < batch.size(); ++s) caches[s] = &batch[s].cache->layer(i);
    h = h + layer.self_attn.Forward(layer.input_layernorm.Forward(h), caches, blocks, windows);
    h = h + layer.mlp.Forward(layer.post_attention_layernorm.Forward(h));
  }
  return norm_.Forward(h);
}

absl::StatusOr<at::Tensor> DFlashDrafter::DraftAnchoredBlocks(const at::Tensor& target_hidden,
                                                              const at::Tensor& block_embeddings,
                                                              const at::Tensor& anchors) const {
  if (!target_hidden.defined() || target_hidden.dim() != 2 ||
      target_hidden.size(1) != fc_.in_features()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "context features must be [S, ", fc_.in_features(), "], got ", ShapeString(target_hidden)));
  }
  if (!anchors.defined() || anchors.dim() != 1 || anchors.size(0) == 0 ||
      anchors.scalar_type() != at::kLong) {
    return absl::InvalidArgumentError("anchors must be a non-empty int64 vector");
  }
  const int64_t blocks = anchors.size(0);
  if (!block_embeddings.defined() || block_embeddings.dim() != 2 ||
      block_embeddings.size(1) != config_.hidden_size || block_embeddings.size(0) % blocks != 0 ||
      block_embeddings.size(0) == 0) {
    return absl::InvalidArgumentError(absl::StrCat("block embeddings must be [", blocks, " · B, ",
                                                   config_.hidden_size, "], got ",
                                                   ShapeString(block_embeddings)));
  }
  const int64_t length = target_hidden.size(0);
  return CatchTorchErrors("DFlash anchored blocks", [&]() -> absl::StatusOr<at::Tensor> {
    if (anchors.min().item<int64_t>() < 1 || anchors.max().item<int64_t>() > length) {
      return absl::InvalidArgumentError(
          absl::StrCat("anchors must lie in [1, ", length, "], the context length"));
    }
    const int64_t block_size = block_embeddings.size(0) / blocks;
    const at::Tensor on_device = anchors.to(options_.device);
    const auto long_options = on_device.options();
    const at::Tensor block_of = at::arange(blocks, long_options).repeat_interleave(block_size);
    const at::Tensor row_anchor = on_device.index_select(0, block_of);  // [N·B]
    const at::Tensor positions = row_anchor + at::arange(block_size, long_options).repeat({blocks});
    // [N·B, S + N·B]: context positions before the row's anchor, then the row's own block.
    const at::Tensor visible =
        at::cat({at::arange(length, long_options).unsqueeze(0) < row_anchor.unsqueeze(1),
                 block_of.unsqueeze(1) == block_of.unsqueeze(0)},
                1);
    const at::Tensor context =
        hidden_norm_.Forward(fc_.Forward(target_hidden.to(options_.device, options_.dtype)));
    const RotaryAngles context_angles = rotary_.Angles(0, length);
    const RotaryAngles angles = rotary_.Angles(positions);
    at::Tensor h = block_embeddings.to(options_.device, options_.dtype);
    for (const Layer& layer : layers_) {
      h = h + layer.self_attn.ForwardMasked(layer.input_layernorm.Forward(h), angles, context,
                                            context_angles, visible);
      h = h + layer.mlp.Forward(layer.post_attention_layernorm.Forward(h));
    }
    return norm_.Forward(h);
  });
}

}  // namespace specd::model
