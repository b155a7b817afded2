#pragma once
// Qwen3.5's full-attention layer: GQA softmax attention with zero-centred q/k norms, partial
// RoPE, and a per-head sigmoid output gate that q_proj produces alongside the query.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <span>
#include <string>

#include "common/io/qwen35_config.h"
#include "common/model/forward_context.h"
#include "common/model/kv_cache.h"
#include "common/model/linear.h"
#include "common/model/qwen35_cache.h"
#include "common/model/rms_norm.h"
#include "common/model/rope.h"
#include "common/model/weight_reader.h"

namespace specd::model {

class GatedAttention {
 public:
  // Reads `<prefix>{q,k,v,o}_proj.weight` and `<prefix>{q,k}_norm.weight`.
  static GatedAttention Load(WeightReader& reader, const io::Qwen35TextConfig& config,
                             const std::string& prefix);

  // x [rows, hidden], the rows of context.sequences; sequence i's earlier positions come from
  // caches[i] (a KvCache), which receives its keys and values.
  at::Tensor Forward(const at::Tensor& x, std::span<LayerCache* const> caches,
                     const ForwardContext& context) const;

  KvCache NewCache(int64_t max_length, const ModelOptions& options) const;
  CacheFootprint SequenceFootprint(const ModelOptions& options) const;

 private:
  int64_t heads_ = 0;
  int64_t kv_heads_ = 0;
  int64_t head_dim_ = 0;
  Linear q_proj_;  // per head: [query (head_dim) | gate (head_dim)]
  Linear k_proj_;
  Linear v_proj_;
  Linear o_proj_;
  ZeroCentredRmsNorm q_norm_;
  ZeroCentredRmsNorm k_norm_;
};

}  // namespace specd::model
