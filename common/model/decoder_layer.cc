#include "common/model/decoder_layer.h"

#include <ATen/ATen.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace specd::model {

DecoderLayer DecoderLayer::Load(WeightReader& reader, const io::Qwen35TextConfig& config,
                                int64_t index) {
  const std::string prefix = absl::StrCat("layers.", index, ".");
  const int64_t hidden = config.hidden_size;
  const int64_t intermediate = config.intermediate_size;
  const double eps = config.rms_norm_eps;
  DecoderLayer layer;
  layer.input_layernorm_ =
      ZeroCentredRmsNorm(reader.Float32(prefix + "input_layernorm.weight", {hidden}), eps);
  if (config.layer_types[index] == io::LayerType::kLinearAttention) {
    layer.mixer_ = GatedDeltaNet::Load(reader, config, prefix + "linear_attn.");
  } else {
    layer.mixer_ = GatedAttention::Load(reader, config, prefix + "self_attn.");
  }
  layer.post_attention_layernorm_ =
      ZeroCentredRmsNorm(reader.Float32(prefix + "post_attention_layernorm.weight", {hidden}), eps);
  layer.mlp_ = SwiGluMlp{
      .gate_proj = reader.Projection(prefix + "mlp.gate_proj", intermediate, hidden),
      .up_proj = reader.Projection(prefix + "mlp.up_proj", intermediate, hidden),
      .down_proj = reader.Projection(prefix + "mlp.down_proj", hidden, intermediate),
  };
  return layer;
}

LayerCache DecoderLayer::NewCache(int64_t max_length, const ModelOptions& options) const {
  if (const auto* delta_net = std::get_if<GatedDeltaNet>(&mixer_)) {
    return delta_net->NewState(options);
  }
  return std::get<GatedAttention>(mixer_).NewCache(max_length, options);
}

CacheFootprint DecoderLayer::SequenceFootprint(const ModelOptions& options) const {
  if (const auto* delta_net = std::get_if<GatedDeltaNet>(&mixer_)) {
    return delta_net->StateFootprint(options);
  }
  return std::get<GatedAttention>(mixer_).SequenceFootprint(options);
}

at::Tensor DecoderLayer::Forward(const at::Tensor& x, std::span<LayerCache* const> caches,
                                 const ForwardContext& context) const {
  const at::Tensor normed = input_layernorm_.Forward(x);
  const at::Tensor mixed =
      std::visit([&](const auto& mixer) { return mixer.Forward(normed, caches, context); }, mixer_);
  const at::Tensor h = x + mixed;
  return h + mlp_.Forward(post_attention_layernorm_.Forward(h));
}

}  // namespace specd::model
