#pragma once
// One pre-norm residual block: x + mixer(norm(x)), then + mlp(norm(x)). The mixer is Gated
// DeltaNet or gated attention, as config.json's layer_types says.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <span>
#include <variant>

#include "common/io/qwen35_config.h"
#include "common/model/forward_context.h"
#include "common/model/gated_attention.h"
#include "common/model/gated_delta_net.h"
#include "common/model/mlp.h"
#include "common/model/qwen35_cache.h"
#include "common/model/rms_norm.h"
#include "common/model/rope.h"
#include "common/model/weight_reader.h"

namespace specd::model {

class DecoderLayer {
 public:
  // Reads `layers.<index>.*`.
  static DecoderLayer Load(WeightReader& reader, const io::Qwen35TextConfig& config, int64_t index);

  // x [rows, hidden]; caches[i] is this layer's cache of context.sequences[i].
  at::Tensor Forward(const at::Tensor& x, std::span<LayerCache* const> caches,
                     const ForwardContext& context) const;

  LayerCache NewCache(int64_t max_length, const ModelOptions& options) const;
  CacheFootprint SequenceFootprint(const ModelOptions& options) const;

 private:
  ZeroCentredRmsNorm input_layernorm_;
  std::variant<GatedDeltaNet, GatedAttention> mixer_;
  ZeroCentredRmsNorm post_attention_layernorm_;
  SwiGluMlp mlp_;
};

}  // namespace specd::model
