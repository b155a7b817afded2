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

CacheFootprint DFlashAttention::SequenceFootprint(const ModelOptions& options) const {
  return KvCache::Footprint(kv_heads_, head_dim_, options);
}

at::Tensor DFlashAttention::Keys(const at::Tensor& x, const RotaryAngles& angles) const {
  return ApplyRotary(k_norm_.Forward(k_proj_.Forward(x).view({x.size(0), kv_heads_, head_dim_})),
                     angles);
}

at::Tensor DFlashAttention::Values(const at::Tensor& x) const {
  return v_proj_.Forward(x).view({x.size(0), kv_heads_, head_dim_});
}

at::Tensor DFlashAttention::Queries(const at::Tensor& x, const RotaryAngles& angles) const {
  return ApplyRotary(q_norm_.Forward(q_proj_.Forward(x).view({x.size(0), heads_, head_dim_})),
                     angles);
}

void DFlashAttention::AppendContext(const at::Tensor& context, std::span<KvCache* const> caches,
                                    const ForwardContext& sequences) const {
  const at::Tensor keys = Keys(context, sequences.angles);
  const at::Tensor values = Values(context);
  for (size_t i = 0; i < caches.size(); ++i) {
    const SequenceRows& rows = sequences.sequences[i];
    caches[i]->Write(rows.start, keys.narrow(0, rows.row, rows.length),
                     values.narrow(0, rows.row, rows.length));
  }
}

at::Tensor DFlashAttention::Forward(const at::Tensor& x, std::span<const KvCache* const> caches,
                                    const ForwardContext& blocks,
                                    std::span<const int64_t> windows) const {
  const at::Tensor queries = Queries(x, blocks.angles);
  const at::Tensor block_keys = Keys(x, blocks.angles);
  const at::Tensor block_values = Values(x);
  const at::Tensor attended = PerSequence(blocks, [&](size_t i, const SequenceRows& block) {
    if (blocks.positions.defined()) {
      return ReplayableForward(
          queries.narrow(0, block.row, block.length), block_keys.narrow(0, block.row, block.length),
          block_values.narrow(0, block.row, block.length),
          blocks.positions.narrow(0, block.row, block.length), *caches[i], windows[i]);
    }
    const int64_t context_length = block.start;
    const int64_t window = windows[i];
    // A window masks nothing until context and block outgrow it. Context keys further than the
    // window from the first query are invisible to every query, so they are not read at all.
    const bool windowed = window > 0 && context_length + block.length > window;
    const int64_t first_key = windowed ? std::max<int64_t>(0, context_length - (window - 1)) : 0;
    const int64_t visible_context = context_length - first_key;
    const KvCache& cache = *caches[i];
    const at::Tensor keys = at::cat(  // [kv_heads, visible_context + B, head_dim]
        {cache.Keys(context_length).narrow(1, first_key, visible_context),
         block_keys.narrow(0, block.row, block.length).transpose(0, 1)},
        1);
    const at::Tensor values =
        at::cat({cache.Values(context_length).narrow(1, first_key, visible_context),
                 block_values.narrow(0, block.row, block.length).transpose(0, 1)},
                1);
    return ops::Attention(queries.narrow(0, block.row, block.length), keys, values,
                          windowed ? ops::Visibility::Window(context_length, first_key, window)
                                   : ops::Visibility::All());
  });
  return o_proj_.Forward(attended.reshape({x.size(0), heads_ * head_dim_}));
}

at::Tensor DFlashAttention::ReplayableForward(const at::Tensor& queries, const at::Tensor& keys,
                                              const at::Tensor& values, const at::Tensor& positions,
                                              const KvCache& cache, int64_t window) {
  // Every position the cache can hold, then the block's own; a block sits right after its
  // context, so its first position is the context's length.
  const int64_t capacity = cache.max_length();
  const at::Tensor key_positions = at::cat({at::arange(capacity, positions.options()), positions});
  const at::Tensor in_context =
      at::arange(capacity, positions.options()) < positions.narrow(0, 0, 1);
  at::Tensor visible =
      at::cat({in_context.unsqueeze(0).expand({positions.size(0), capacity}),
               at::ones({positions.size(0), positions.size(0)}, in_context.options())},
              1);
  if (window > 0) {
    visible &= (key_positions.unsqueeze(0) - positions.unsqueeze(1)).abs() < window;
  }
  return ops::Attention(queries, at::cat({cache.Keys(capacity), keys.transpose(0, 1)}, 1),
                        at::cat({cache.Values(capacity), values.transpose(0, 1)}, 1),
                        ops::Visibility::Mask(visible));
}

at::Tensor DFlashAttention::ForwardMasked(const at::Tensor& x, const RotaryAngles& angles,
                                          const at::Tensor& context,
                                          const RotaryAngles& context_angles,
                                          const at::Tensor& visible) const {
  const at::Tensor keys =
      at::cat({Keys(context, context_angles), Keys(x, angles)}, 0).transpose(0, 1);
  const at::Tensor values = at::cat({Values(context), Values(x)}, 0).transpose(0, 1);
  return o_proj_.Forward(
      ops::Attention(Queries(x, angles), keys, values, ops::Visibility::Mask(visible))
          .reshape({x.size(0), heads_ * head_dim_}));
}

}  // namespace specd::model
