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

at::Tensor GatedAttention::Forward(const at::Tensor& x, KvCache& cache, int64_t start,
                                   const RotaryAngles& angles) const {
  const int64_t length = x.size(0);
  const at::Tensor query_and_gate = q_proj_.Forward(x).view({length, heads_, 2 * head_dim_});
  const at::Tensor gate = query_and_gate.narrow(-1, head_dim_, head_dim_);
  const at::Tensor q =
      ApplyRotary(q_norm_.Forward(query_and_gate.narrow(-1, 0, head_dim_)), angles);
  const at::Tensor k =
      ApplyRotary(k_norm_.Forward(k_proj_.Forward(x).view({length, kv_heads_, head_dim_})), angles);
  cache.Write(start, k, v_proj_.Forward(x).view({length, kv_heads_, head_dim_}));

  const int64_t context = start + length;
  // Query t sits at position start + t and sees the cache's keys up to there.
  const at::Tensor attended =
      ops::Attention(q, cache.Keys(context), cache.Values(context), ops::Visibility::Causal(start))
          .reshape({length, heads_ * head_dim_});
  return o_proj_.Forward(attended * at::sigmoid(gate.reshape({length, heads_ * head_dim_})));
}

}  // namespace specd::model
