#pragma once
// One pre-norm residual block: x + mixer(norm(x)), then + mlp(norm(x)). The mixer is Gated
// DeltaNet or gated attention, as config.json's layer_types says.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <variant>

#include "common/io/qwen35_config.h"
#include "common/model/gated_attention.h"
#include "common/model/gated_delta_net.h"
#include "common/model/mlp.h"
#include "common/model/qwen35_cache.h"
#include "common/model/rms_norm.h"
#include "common/model/rope.h"
#include "common/model/weight_reader.h"

namespace specd::model {

// What every layer of one forward call shares.
struct ForwardContext {
  int64_t start = 0;  // position of the first token
  RotaryAngles angles;
  bool keep_for_rollback = false;  // a verify block
};

class DecoderLayer {
 public:
  // Reads `layers.<index>.*`.
  static DecoderLayer Load(WeightReader& reader, const io::Qwen35TextConfig& config, int64_t index);

  at::Tensor Forward(const at::Tensor& x, LayerCache& cache, const ForwardContext& context) const;

  LayerCache NewCache(int64_t max_length, const ModelOptions& options) const;

 private:
  ZeroCentredRmsNorm input_layernorm_;
  std::variant<GatedDeltaNet, GatedAttention> mixer_;
  ZeroCentredRmsNorm post_attention_layernorm_;
  SwiGluMlp mlp_;
};

}  // namespace specd::model
