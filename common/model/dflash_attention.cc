#include "common/model/dflash_attention.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "common/model/ops/ops.h"

namespace specd::model {

DFlashAttention DFlashAttention::Load(WeightReader& reader, const io::DFlashDraftConfig& config,
                                      const std::string& prefix) {
  DFlashAttention layer;
  layer.heads_ = config.num_attention_heads;
  layer.kv_heads_ = config.num_key_value_heads;
  layer.head_dim_ = config.head_dim;
  const int64_t hidden = config.hidden_size;
  const int64_t d = config.head_dim;
  layer.q_proj_ = reader.Projection(prefix + "q_proj", layer.heads_ * d, hidden);
  layer.k_proj_ = reader.Projection(prefix + "k_proj", layer.kv_heads_ * d, hidden);
  layer.v_proj_ = reader.Projection(prefix + "v_proj", layer.kv_heads_ * d, hidden);
  layer.o_proj_ = reader.Projection(prefix + "o_proj", hidden, layer.heads_ * d);
  const double eps = config.rms_norm_eps;
  layer.q_norm_ = PlainRmsNorm(reader.Float32(prefix + "q_norm.weight", {d}), eps);
  layer.k_norm_ = PlainRmsNorm(reader.Float32(prefix + "k_norm.weight", {d}), eps);
  return layer;
}

KvCache DFlashAttention::NewCache(int64_t max_length, const ModelOptions& options) const {
  return KvCache(kv_heads_, head_dim_, max_length, options);
}

at::Tensor DFlashAttention::Keys(const at::Tensor& x, const RotaryAngles& angles) const {
  return ApplyRotary(k_norm_.Forward(k_proj_.Forward(x).view({x.size(0), kv_heads_, head_dim_})),
                     angles);
}

at::Tensor DFlashAttention::Values(const at::Tensor& x) const {
  return v_proj_.Forward(x).view({x.size(0), kv_heads_, head_dim_});
}

void DFlashAttention::AppendContext(const at::Tensor& context, KvCache& cache, int64_t start,
                                    const RotaryAngles& angles) const {
  cache.Write(start, Keys(context, angles), Values(context));
}

at::Tensor DFlashAttention::Forward(const at::Tensor& x, const KvCache& cache,
                                    int64_t context_length, const RotaryAngles& angles,
                                    int64_t window) const {
  const int64_t length = x.size(0);
  // A window masks nothing until context and block outgrow it. Context keys further than the
  // window from the first query are invisible to every query, so they are not read at all.
  const bool windowed = window > 0 && context_length + length > window;
  const int64_t first_key = windowed ? std::max<int64_t>(0, context_length - (window - 1)) : 0;
  const int64_t visible_context = context_length - first_key;
  const at::Tensor keys = at::cat(  // [kv_heads, visible_context + B, head_dim]
      {cache.Keys(context_length).narrow(1, first_key, visible_context),
       Keys(x, angles).transpose(0, 1)},
      1);
  const at::Tensor values =
      at::cat({cache.Values(context_length).narrow(1, first_key, visible_context),
               Values(x).transpose(0, 1)},
              1);
  return Attend(x, angles, keys, values,
                windowed ? ops::Visibility::Window(context_length, first_key, window)
                         : ops::Visibility::All());
}

at::Tensor DFlashAttention::ForwardMasked(const at::Tensor& x, const RotaryAngles& angles,
                                          const at::Tensor& context,
                                          const RotaryAngles& context_angles,
                                          const at::Tensor& visible) const {
  const at::Tensor keys =
      at::cat({Keys(context, context_angles), Keys(x, angles)}, 0).transpose(0, 1);
  const at::Tensor values = at::cat({Values(context), Values(x)}, 0).transpose(0, 1);
  return Attend(x, angles, keys, values, ops::Visibility::Mask(visible));
}

at::Tensor DFlashAttention::Attend(const at::Tensor& x, const RotaryAngles& angles,
                                   const at::Tensor& keys, const at::Tensor& values,
                                   const ops::Visibility& visibility) const {
  const int64_t length = x.size(0);
  const at::Tensor q =
      ApplyRotary(q_norm_.Forward(q_proj_.Forward(x).view({length, heads_, head_dim_})), angles);
  return o_proj_.Forward(
      ops::Attention(q, keys, values, visibility).reshape({length, heads_ * head_dim_}));
}

}  // namespace specd::model
