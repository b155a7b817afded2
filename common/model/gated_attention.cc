#include "common/model/gated_attention.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

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
  const at::Tensor keys = cache.Keys(context);  // [kv_heads, context, head_dim]
  const at::Tensor values = cache.Values(context);
  // Query heads that share a KV head are stacked, so GQA is one batched product per KV head.
  const int64_t group = heads_ / kv_heads_;
  const at::Tensor grouped_q = q.permute({1, 0, 2}).reshape({kv_heads_, group * length, head_dim_});
  at::Tensor scores = at::matmul(grouped_q, keys.transpose(1, 2)).to(at::kFloat) /
                      std::sqrt(static_cast<double>(head_dim_));
  if (length > 1) {
    // Query t sits at position start + t and sees keys up to there.
    const auto long_options = at::TensorOptions().dtype(at::kLong).device(x.device());
    const at::Tensor query_positions = at::arange(start, context, long_options).repeat({group});
    const at::Tensor future =
        at::arange(context, long_options).unsqueeze(0) > query_positions.unsqueeze(1);
    scores.masked_fill_(future, -std::numeric_limits<float>::infinity());
  }
  const at::Tensor probs = at::softmax(scores, -1).to(x.scalar_type());
  const at::Tensor attended = at::matmul(probs, values)  // [kv_heads, group * T, head_dim]
                                  .view({heads_, length, head_dim_})
                                  .permute({1, 0, 2})
                                  .reshape({length, heads_ * head_dim_});
  return o_proj_.Forward(attended * at::sigmoid(gate.reshape({length, heads_ * head_dim_})));
}

}  // namespace specd::model
