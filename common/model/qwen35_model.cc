#include "common/model/qwen35_model.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/torch_errors.h"
#include "common/io/qwen35_checkpoint_config.h"
#include "common/model/linear.h"
#include "common/model/step_graphs.h"
#include "common/model/weight_reader.h"

namespace specd::model {
namespace {

// Which of transformers' `count` hidden states some sequence of `batch` asked for.
std::vector<bool> WantedStates(std::span<const SequenceInput> batch, size_t count) {
  std::vector<bool> wanted(count, false);
  for (const SequenceInput& input : batch) {
    for (const int64_t index : input.options.hidden_states) wanted[index] = true;
  }
  return wanted;
}

}  // namespace

using base::CatchTorchErrors;

int64_t SequenceInput::logit_row_count() const {
  switch (options.logit_rows) {
    case LogitRows::kAll:
      return static_cast<int64_t>(ids.size());
    case LogitRows::kLast:
      return 1;
    case LogitRows::kNone:
      return 0;
  }
  return 0;
}

absl::StatusOr<Qwen35Model> Qwen35Model::Load(const std::filesystem::path& dir,
                                              const ModelOptions& options) {
  absl::StatusOr<io::Qwen35CheckpointConfig> config = io::ReadQwen35CheckpointConfig(dir);
  if (!config.ok()) return config.status();
  absl::StatusOr<QuantizedModuleMatcher> quantized =
      QuantizedModuleMatcher::FromConfig(config->quantization);
  if (!quantized.ok()) return quantized.status();
  absl::StatusOr<io::Checkpoint> checkpoint = io::Checkpoint::Open(dir);
  if (!checkpoint.ok()) return checkpoint.status();
  return Load(config->text, *checkpoint, options, *quantized);
}

absl::StatusOr<Qwen35Model> Qwen35Model::Load(const io::Qwen35TextConfig& config,
                                              const io::Checkpoint& checkpoint,
                                              const ModelOptions& options,
                                              const QuantizedModuleMatcher& quantized) {
  if (config.num_key_value_heads <= 0 ||
      config.num_attention_heads % config.num_key_value_heads != 0 ||
      config.linear_num_key_heads <= 0 ||
      config.linear_num_value_heads % config.linear_num_key_heads != 0) {
    return absl::InvalidArgumentError(
        "config.json: attention heads must be a multiple of key/value heads, and DeltaNet value "
        "heads a multiple of DeltaNet key heads");
  }
  return CatchTorchErrors("loading the Qwen3.5 model", [&]() -> absl::StatusOr<Qwen35Model> {
    Qwen35Model model;
    model.config_ = config;
    model.options_ = options;
    WeightReader reader(checkpoint, config.tensor_prefix, options, quantized);
    const int64_t vocab = config.vocab_size;
    const int64_t hidden = config.hidden_size;
    const at::Tensor embed_tokens = reader.Matrix("embed_tokens.weight", vocab, hidden);
    for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
      model.layers_.push_back(DecoderLayer::Load(reader, config, i));
    }
    model.norm_ = ZeroCentredRmsNorm(reader.Float32("norm.weight", {hidden}), config.rms_norm_eps);
    if (!reader.status().ok()) return reader.status();
    model.parameters_ = reader.parameters();
    model.int4_bytes_ = reader.int4_bytes();
    if (config.tie_word_embeddings) {
      model.head_ = TokenHead(embed_tokens, embed_tokens, options);
    } else {
      absl::StatusOr<at::Tensor> lm_head =
          TokenHead::ReadUntiedHead(config, checkpoint, options, quantized, model.parameters_);
      if (!lm_head.ok()) return lm_head.status();
      model.head_ = TokenHead(embed_tokens, *std::move(lm_head), options);
    }
    TokenHead::ReleaseCheckpointPages(config, checkpoint);
    const auto rotary_dim = static_cast<int64_t>(config.head_dim * config.partial_rotary_factor);
    model.rotary_ = RotaryEmbedding(rotary_dim, config.rope_theta, options);
    if (options.cuda_graphs) model.step_graphs_ = std::make_shared<StepGraphs>();
    return model;
  });
}

absl::StatusOr<Qwen35Cache> Qwen35Model::NewCache(int64_t max_length) const {
  if (max_length <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache length ", max_length, " is not positive"));
  }
  return CatchTorchErrors("allocating a cache", [&] {
    std::vector<LayerCache> layers;
    layers.reserve(layers_.size());
    for (const DecoderLayer& layer : layers_)
      layers.push_back(layer.NewCache(max_length, options_));
    return Qwen35Cache(std::move(layers), max_length);
  });
}

CacheFootprint Qwen35Model::SequenceFootprint() const {
  CacheFootprint footprint;
  for (const DecoderLayer& layer : layers_)
    footprint = footprint + layer.SequenceFootprint(options_);
  return footprint;
}

absl::StatusOr<ForwardOutput> Qwen35Model::Prefill(std::span<const int64_t> ids, Qwen35Cache& cache,
                                                   const ForwardOptions& options) const {
  cache.Reset();
  return Extend(ids, cache, options);
}

absl::StatusOr<ForwardOutput> Qwen35Model::Extend(std::span<const int64_t> ids, Qwen35Cache& cache,
                                                  const ForwardOptions& options) const {
  return Run(ids, cache, options, /*keep_for_rollback=*/false);
}

absl::StatusOr<at::Tensor> Qwen35Model::Decode(int64_t token, Qwen35Cache& cache) const {
  absl::StatusOr<ForwardOutput> output = Extend(std::span<const int64_t>(&token, 1), cache);
  if (!output.ok()) return output.status();
  return output->logits[0];
}

absl::StatusOr<ForwardOutput> Qwen35Model::ForwardBlock(std::span<const int64_t> ids,
                                                        Qwen35Cache& cache,
                                                        const ForwardOptions& options) const {
  return Run(ids, cache, options, /*keep_for_rollback=*/true);
}

absl::StatusOr<ForwardOutput> Qwen35Model::Run(std::span<const int64_t> ids, Qwen35Cache& cache,
                                               const ForwardOptions& options,
                                               bool keep_for_rollback) const {
  const SequenceInput input{
      .ids = ids, .cache = &cache, .options = options, .keep_for_rollback = keep_for_rollback};
  absl::StatusOr<std::vector<ForwardOutput>> outputs = ForwardBatch({&input, 1});
  if (!outputs.ok()) return outputs.status();
  return std::move(outputs->front());
}

absl::Status Qwen35Model::CheckInput(const SequenceInput& input) const {
  if (input.cache == nullptr) return absl::InvalidArgumentError("a sequence has no cache");
  const Qwen35Cache& cache = *input.cache;
  if (input.ids.empty()) return absl::InvalidArgumentError("no tokens to feed");
  if (cache.length() + static_cast<int64_t>(input.ids.size()) > cache.max_length()) {
    return absl::OutOfRangeError(absl::StrCat("cache holds ", cache.length(), " of ",
                                              cache.max_length(), " tokens; ", input.ids.size(),
                                              " more do not fit"));
  }
  for (const int64_t id : input.ids) {
    if (id < 0 || id >= config_.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token id ", id, " is outside the vocabulary [0, ", config_.vocab_size, ")"));
    }
  }
  for (const int64_t index : input.options.hidden_states) {
    if (index < 0 || index > config_.num_hidden_layers) {
      return absl::InvalidArgumentError(
          absl::StrCat("hidden state ", index, " is not in [0, ", config_.num_hidden_layers, "]"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ForwardOutput>> Qwen35Model::ForwardBatch(
    std::span<const SequenceInput> batch) const {
  if (batch.empty()) return absl::InvalidArgumentError("an empty batch");
  for (size_t i = 0; i < batch.size(); ++i) {
    if (absl::Status checked = CheckInput(batch[i]); !checked.ok()) return checked;
    for (size_t j = 0; j < i; ++j) {
      if (batch[j].cache == batch[i].cache) {
        return absl::InvalidArgumentError("two sequences of one batch share a cache");
      }
    }
  }
  return CatchTorchErrors("Qwen3.5 forward", [&] { return Forward(batch); });
}

std::vector<ForwardOutput> Qwen35Model::Forward(std::span<const SequenceInput> batch) const {
  ForwardContext context;
  std::vector<int64_t> ids;
  for (const SequenceInput& input : batch) {
    context.Add(static_cast<int64_t>(input.ids.size()), input.cache->length(),
                input.keep_for_rollback);
    ids.insert(ids.end(), input.ids.begin(), input.ids.end());
  }
  context.angles = rotary_.Angles(at::tensor(context.Positions(), at::kLong));
  const at::Tensor device_ids = at::tensor(ids, at::kLong).to(options_.device);
  // Decode steps and verify blocks, every row's logits asked for, go through step_graphs_; prompt
  // chunks, long enough to hide their launches, do not.
  const bool replayable =
      step_graphs_ != nullptr && std::ranges::all_of(batch, [](const SequenceInput& input) {
        return (input.ids.size() == 1 || input.keep_for_rollback) &&
               input.logit_row_count() == static_cast<int64_t>(input.ids.size());
      });
  const BatchOutput output =
      replayable ? RunGraph(batch, context, device_ids) : RunLayers(batch, context, device_ids);
  for (size_t s = 0; s < batch.size(); ++s) {
    batch[s].cache->Append(context.sequences[s].length, batch[s].keep_for_rollback);
  }

  std::vector<ForwardOutput> outputs(batch.size());
  int64_t logit_row = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    const SequenceRows& rows = context.sequences[s];
    if (const int64_t count = batch[s].logit_row_count(); count > 0) {
      outputs[s].logits = output.logits.narrow(0, logit_row, count);
      logit_row += count;
    }
    for (const int64_t index : batch[s].options.hidden_states) {
      outputs[s].hidden_states.push_back(output.states[index].narrow(0, rows.row, rows.length));
    }
  }
  return outputs;
}

Qwen35Model::BatchOutput Qwen35Model::RunLayers(std::span<const SequenceInput> batch,
                                                const ForwardContext& context,
                                                const at::Tensor& ids) const {
  BatchOutput output;
  output.states.resize(layers_.size() + 1);
  const std::vector<bool> wanted = WantedStates(batch, output.states.size());
  const auto keep_state = [&](size_t index, const at::Tensor& h) {
    if (wanted[index]) output.states[index] = h;
  };
  at::Tensor h = Embed(ids);
  keep_state(0, h);
  std::vector<LayerCache*> caches(batch.size());
  for (size_t i = 0; i < layers_.size(); ++i) {
    for (size_t s = 0; s < batch.size(); ++s) caches[s] = &batch[s].cache->layer(i);
    h = layers_[i].Forward(h, caches, context);
    if (i + 1 < layers_.size()) keep_state(i + 1, h);
  }
  h = norm_.Forward(h);
  keep_state(layers_.size(), h);

  // One head product over the rows whose logits some sequence wants.
  std::vector<int64_t> logit_rows;
  for (size_t s = 0; s < batch.size(); ++s) {
    const SequenceRows& rows = context.sequences[s];
    for (int64_t row = rows.row + rows.length - batch[s].logit_row_count();
         row < rows.row + rows.length; ++row) {
      logit_rows.push_back(row);
    }
  }
  if (!logit_rows.empty()) {
    const auto count = static_cast<int64_t>(logit_rows.size());
    const bool contiguous = logit_rows.back() - logit_rows.front() + 1 == count;
    output.logits =
        Head(contiguous ? h.narrow(0, logit_rows.front(), count)
                        : h.index_select(0, at::tensor(logit_rows, at::kLong).to(options_.device)));
  }
  return output;
}

Qwen35Model::BatchOutput Qwen35Model::RunGraph(std::span<const SequenceInput> batch,
                                               const ForwardContext& context,
                                               const at::Tensor& ids) const {
  // A graph writes what is on the device only: each sequence's replay of the accepted rows of its
  // last block runs before it, and the block a verify forward keeps comes back as outputs.
  std::vector<uint64_t> caches;
  std::vector<int64_t> settings;  // each sequence's rows and whether it keeps them, then the taps
  for (const SequenceInput& input : batch) {
    input.cache->ForEachDeltaNetState([](GatedDeltaNetState& state) { state.ApplyReplay(); });
    caches.push_back(input.cache->id());
    settings.push_back(static_cast<int64_t>(input.ids.size()));
    settings.push_back(input.keep_for_rollback ? 1 : 0);
  }
  const std::vector<bool> wanted = WantedStates(batch, layers_.size() + 1);
  std::vector<int64_t> taps;
  for (size_t index = 0; index < wanted.size(); ++index) {
    if (wanted[index]) taps.push_back(static_cast<int64_t>(index));
  }
  settings.insert(settings.end(), taps.begin(), taps.end());
  const std::vector<at::Tensor> outputs = step_graphs_->Run(
      caches, settings, context.GraphInputs(ids, options_.device),
      [&](std::span<const at::Tensor> step) {
        const BatchOutput output = RunLayers(batch, context.Replaying(step), step[0]);
        std::vector<at::Tensor> tensors = {output.logits};
        for (const int64_t tap : taps) tensors.push_back(output.states[tap]);
        for (const SequenceInput& input : batch) {
          if (!input.keep_for_rollback) continue;
          input.cache->ForEachDeltaNetState(
              [&](const GatedDeltaNetState& state) { state.AppendBlock(tensors); });
        }
        return tensors;
      });
  // The logits and taps go to the caller, in memory of their own; the kept blocks stay the graph's,
  // read (by a rollback or the next replay) before its next replay overwrites them.
  BatchOutput output{.logits = outputs[0].clone(), .states = {}};
  output.states.resize(layers_.size() + 1);
  size_t next = 1;
  for (const int64_t tap : taps) output.states[tap] = outputs[next++].clone();
  for (const SequenceInput& input : batch) {
    if (!input.keep_for_rollback) continue;
    input.cache->ForEachDeltaNetState([&](GatedDeltaNetState& state) {
      state.KeepBlock({&outputs[next], GatedDeltaNetState::kBlockTensors});
      next += GatedDeltaNetState::kBlockTensors;
    });
  }
  return output;
}

}  // namespace specd::model
