#pragma once
// Qwen3.5's linear-attention layer, Gated DeltaNet: projections to q, k, v (through a causal
// depthwise conv and SiLU), a per-head decay g and write strength β, the gated delta rule, and a
// gated RMSNorm per value head before the output projection.
#include <ATen/core/Tensor.h>

#include <span>
#include <string>

#include "common/io/qwen35_config.h"
#include "common/model/forward_context.h"
#include "common/model/gated_delta_net_state.h"
#include "common/model/linear.h"
#include "common/model/qwen35_cache.h"
#include "common/model/rms_norm.h"
#include "common/model/weight_reader.h"

namespace specd::model {

class GatedDeltaNet {
 public:
  // Reads `<prefix>in_proj_{qkv,z,b,a}.weight`, `conv1d.weight`, `A_log`, `dt_bias`,
  // `norm.weight` and `out_proj.weight`.
  static GatedDeltaNet Load(WeightReader& reader, const io::Qwen35TextConfig& config,
                            const std::string& prefix);

  // x [rows, hidden], the rows of context.sequences; sequence i continues what caches[i] (a
  // GatedDeltaNetState) holds.
  at::Tensor Forward(const at::Tensor& x, std::span<LayerCache* const> caches,
                     const ForwardContext& context) const;

  GatedDeltaNetState NewState(const ModelOptions& options) const;
  CacheFootprint StateFootprint(const ModelOptions& options) const;

 private:
  GatedDeltaNetDims dims_;
  Linear in_proj_qkv_;  // rows: q (key heads), k (key heads), v (value heads), not interleaved
  Linear in_proj_z_;    // output gate
  Linear in_proj_b_;    // β logits, one per value head
  Linear in_proj_a_;    // decay logits, one per value head
  // The stored tensors, not forms derived from them at load, so that a trainer updates what
  // the forward uses.
  at::Tensor conv_weight_;  // [conv_channels, 1, kernel]
  at::Tensor a_log_;        // log of the decay rate, float32 [value_heads]
  at::Tensor dt_bias_;      // float32 [value_heads]
  // Constants: q's and k's L2 norms (q's with the 1/√key_dim of attention) as RMS norm weights.
  at::Tensor query_norm_weight_;  // float32 [key_dim]
  at::Tensor key_norm_weight_;    // float32 [key_dim]
  GatedRmsNorm norm_;
  Linear out_proj_;
};

}  // namespace specd::model
