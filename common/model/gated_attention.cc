#include "common/model/gated_attention.h"

#include <ATen/ATen.h>

#include "common/model/ops/ops.h"

namespace specd::model {

GatedAttention GatedAttention::Load(WeightReader& reader, const io::Qwen35TextConfig& config,
                                    const std::string& prefix) {
  GatedAttention layer;
  layer.heads_ = config.num_attention_heads;
  layer.kv_heads_ = config.num_key_value_heads;
  layer.head_dim_ = config.head_dim;
  const int64_t hidden = config.hidden_size;
  const int64_t d = config.head_dim;
  layer.q_proj_ = reader.Projection(prefix + "q_proj", 2 * layer.heads_ * d, hidden);
  layer.k_proj_ = reader.Projection(prefix + "k_proj", layer.kv_heads_ * d, hidden);
  layer.v_proj_ = reader.Projection(prefix + "v_proj", layer.kv_heads_ * d, hidden);
  layer.o_proj_ = reader.Projection(prefix + "o_proj", hidden, layer.heads_ * d);
  const double eps = config.rms_norm_eps;
  layer.q_norm_ = ZeroCentredRmsNorm(reader.Float32(prefix + "q_norm.weight", {d}), eps);
  layer.k_norm_ = ZeroCentredRmsNorm(reader.Float32(prefix + "k_norm.weight", {d}), eps);
  return layer;
}

KvCache GatedAttention::NewCache(int64_t max_length, const ModelOptions& options) const {
  return KvCache(kv_heads_, head_dim_, max_length, options);
}

CacheFootprint GatedAttention::SequenceFootprint(const ModelOptions& options) const {
  return KvCache::Footprint(kv_heads_, head_dim_, options);
}

at::Tensor GatedAttention::Forward(const at::Tensor& x, std::span<LayerCache* const> caches,
                                   const ForwardContext& context) const {
  const int64_t rows = x.size(0);
  const at::Tensor query_and_gate = q_proj_.Forward(x).view({rows, heads_, 2 * head_dim_});
  const at::Tensor gate = query_and_gate.narrow(-1, head_dim_, head_dim_);
  const at::Tensor q =
      ApplyRotary(q_norm_.Forward(query_and_gate.narrow(-1, 0, head_dim_)), context.angles);
  const at::Tensor k = ApplyRotary(
      k_norm_.Forward(k_proj_.Forward(x).view({rows, kv_heads_, head_dim_})), context.angles);
  const at::Tensor v = v_proj_.Forward(x).view({rows, kv_heads_, head_dim_});
  const at::Tensor attended = PerSequence(context, [&](size_t i, const SequenceRows& sequence) {
    KvCache& cache = std::get<KvCache>(*caches[i]);
    const auto rows_of = [&](const at::Tensor& t) {
      return t.narrow(0, sequence.row, sequence.length);
    };
    if (context.positions.defined()) {  // the form a CUDA graph replays
      const at::Tensor positions = rows_of(context.positions);
      cache.Write(positions, rows_of(k), rows_of(v));
      const int64_t keys = cache.max_length();
      const at::Tensor visible =
          at::arange(keys, positions.options()).unsqueeze(0) <= positions.unsqueeze(1);
      return ops::Attention(rows_of(q), cache.Keys(keys), cache.Values(keys),
                            ops::Visibility::Mask(visible));
    }
    cache.Write(sequence.start, rows_of(k), rows_of(v));
    const int64_t seen = sequence.start + sequence.length;
    // Query t sits at position start + t and sees the cache's keys up to there.
    return ops::Attention(rows_of(q), cache.Keys(seen), cache.Values(seen),
                          ops::Visibility::Causal(sequence.start));
  });
  return o_proj_.Forward(attended.reshape({rows, heads_ * head_dim_}) *
                         at::sigmoid(gate.reshape({rows, heads_ * head_dim_})));
}

}  // namespace specd::model
