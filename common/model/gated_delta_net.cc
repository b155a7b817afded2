#include "common/model/gated_delta_net.h"

#include <ATen/ATen.h>

#include <cmath>
#include <span>
#include <utility>
#include <vector>

#include "common/model/ops/ops.h"

namespace specd::model {
namespace {

// x / √(Σ x² + 1e-6) · scale over each head's dim is an RMS norm: x / √(mean x² + 1e-6 / dim) ·
// scale / √dim (one kernel where the composition took five ops), with this constant weight.
at::Tensor L2NormWeight(int64_t dim, double scale, const at::TensorOptions& options) {
  return at::full({dim}, scale / std::sqrt(static_cast<double>(dim)), options);
}

at::Tensor L2Normalised(const at::Tensor& heads, const at::Tensor& weight) {
  return ops::RmsNorm(heads.contiguous(), weight, 1e-6 / static_cast<double>(heads.size(-1)),
                      ops::NormWeight::kPlain);
}

// The pieces' rows back to back.
DeltaRuleInputs Joined(std::span<const DeltaRuleInputs> pieces) {
  const auto join = [&](at::Tensor DeltaRuleInputs::*member) {
    std::vector<at::Tensor> parts;
    for (const DeltaRuleInputs& piece : pieces) parts.push_back(piece.*member);
    return at::cat(parts, 0);
  };
  return {join(&DeltaRuleInputs::q), join(&DeltaRuleInputs::k), join(&DeltaRuleInputs::v),
          join(&DeltaRuleInputs::g), join(&DeltaRuleInputs::beta)};
}

// The recurrence over the batch's rows, each sequence's replayed rows (the accepted part of its
// last verify block) run first in its part of the op; returns the output of the batch's rows.
at::Tensor Recurrence(const DeltaRuleInputs& inputs, std::span<const SequenceRows> rows,
                      const std::vector<GatedDeltaNetState::Recurrence>& parts) {
  std::vector<ops::DeltaRuleSequence> sequences;
  bool replays = false;
  for (const GatedDeltaNetState::Recurrence& part : parts) {
    sequences.push_back(part.sequence);
    replays = replays || part.replay.has_value();
  }
  if (!replays) {
    return ops::GatedDeltaRule(inputs.q, inputs.k, inputs.v, inputs.g, inputs.beta, sequences);
  }
  std::vector<DeltaRuleInputs> pieces;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].replay.has_value()) pieces.push_back(*parts[i].replay);
    pieces.push_back(inputs.Rows(rows[i].row, rows[i].length));
  }
  const DeltaRuleInputs joined = Joined(pieces);
  const at::Tensor out =
      ops::GatedDeltaRule(joined.q, joined.k, joined.v, joined.g, joined.beta, sequences);
  std::vector<at::Tensor> own;
  int64_t row = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    own.push_back(out.narrow(0, row + sequences[i].length - rows[i].length, rows[i].length));
    row += sequences[i].length;
  }
  return own.size() == 1 ? own.front() : at::cat(own, 0);
}

}  // namespace

GatedDeltaNet GatedDeltaNet::Load(WeightReader& reader, const io::Qwen35TextConfig& config,
                                  const std::string& prefix) {
  GatedDeltaNet layer;
  GatedDeltaNetDims& dims = layer.dims_;
  dims.key_heads = config.linear_num_key_heads;
  dims.value_heads = config.linear_num_value_heads;
  dims.key_dim = config.linear_key_head_dim;
  dims.value_dim = config.linear_value_head_dim;
  dims.conv_kernel = config.linear_conv_kernel_dim;
  const int64_t hidden = config.hidden_size;
  const int64_t value_width = dims.value_heads * dims.value_dim;
  layer.in_proj_qkv_ = reader.Projection(prefix + "in_proj_qkv", dims.conv_channels(), hidden);
  layer.in_proj_z_ = reader.Projection(prefix + "in_proj_z", value_width, hidden);
  layer.in_proj_b_ = reader.Projection(prefix + "in_proj_b", dims.value_heads, hidden);
  layer.in_proj_a_ = reader.Projection(prefix + "in_proj_a", dims.value_heads, hidden);
  layer.conv_weight_ =
      reader.Weight(prefix + "conv1d.weight", {dims.conv_channels(), 1, dims.conv_kernel});
  layer.a_log_ = reader.Float32(prefix + "A_log", {dims.value_heads});
  layer.dt_bias_ = reader.Float32(prefix + "dt_bias", {dims.value_heads});
  layer.query_norm_weight_ = L2NormWeight(
      dims.key_dim, 1 / std::sqrt(static_cast<double>(dims.key_dim)), layer.a_log_.options());
  layer.key_norm_weight_ = L2NormWeight(dims.key_dim, 1, layer.a_log_.options());
  layer.norm_ =
      GatedRmsNorm(reader.Weight(prefix + "norm.weight", {dims.value_dim}), config.rms_norm_eps);
  layer.out_proj_ = reader.Projection(prefix + "out_proj", hidden, value_width);
  return layer;
}

GatedDeltaNetState GatedDeltaNet::NewState(const ModelOptions& options) const {
  return GatedDeltaNetState(dims_, options);
}

CacheFootprint GatedDeltaNet::StateFootprint(const ModelOptions& options) const {
  return GatedDeltaNetState::Footprint(dims_, options);
}

at::Tensor GatedDeltaNet::Forward(const at::Tensor& x, std::span<LayerCache* const> caches,
                                  const ForwardContext& context) const {
  const int64_t rows = x.size(0);
  const int64_t key_width = dims_.key_heads * dims_.key_dim;
  const auto state_of = [&](size_t i) -> GatedDeltaNetState& {
    return std::get<GatedDeltaNetState>(*caches[i]);
  };
  // The batch's sequences take each op in one call, each on its own state.
  const at::Tensor conv_inputs = in_proj_qkv_.Forward(x);  // [rows, conv_channels]
  std::vector<ops::ConvSequence> conv_parts;
  for (size_t i = 0; i < caches.size(); ++i) {
    const SequenceRows& sequence = context.sequences[i];
    conv_parts.push_back(state_of(i).StartConv(sequence.length, sequence.keep_for_rollback));
  }
  const at::Tensor mixed =
      ops::CausalConv1dAdvance(conv_inputs, conv_weight_.squeeze(1), conv_parts);  // silu'd

  // Each q/k head serves value_heads / key_heads consecutive value heads.
  const int64_t repeats = dims_.value_heads / dims_.key_heads;
  const auto heads_of = [&](int64_t offset, int64_t heads, int64_t dim) {
    return mixed.narrow(1, offset, heads * dim).view({rows, heads, dim}).to(at::kFloat);
  };
  const at::Tensor q =
      L2Normalised(heads_of(0, dims_.key_heads, dims_.key_dim), query_norm_weight_);
  const at::Tensor k =
      L2Normalised(heads_of(key_width, dims_.key_heads, dims_.key_dim), key_norm_weight_);
  const auto per_value_head = [&](const at::Tensor& t) {
    return repeats == 1 ? t : t.repeat_interleave(repeats, 1);
  };
  ops::DeltaRuleGates gates = ops::GatedDeltaNetGates(
      in_proj_a_.Forward(x).to(at::kFloat), in_proj_b_.Forward(x).to(at::kFloat), a_log_, dt_bias_);
  const DeltaRuleInputs inputs{
      .q = per_value_head(q),
      .k = per_value_head(k),
      .v = heads_of(2 * key_width, dims_.value_heads, dims_.value_dim),
      .g = std::move(gates.g),
      .beta = std::move(gates.beta),
  };
  std::vector<GatedDeltaNetState::Recurrence> recurrence_parts;
  for (size_t i = 0; i < caches.size(); ++i) {
    const SequenceRows& sequence = context.sequences[i];
    recurrence_parts.push_back(state_of(i).StartRecurrence(
        conv_inputs.narrow(0, sequence.row, sequence.length),
        inputs.Rows(sequence.row, sequence.length), sequence.keep_for_rollback));
  }
  const at::Tensor core = Recurrence(inputs, context.sequences, recurrence_parts);

  const at::Tensor z = in_proj_z_.Forward(x).view({rows, dims_.value_heads, dims_.value_dim});
  const at::Tensor gated = norm_.Forward(core.to(x.scalar_type()), z);
  return out_proj_.Forward(gated.reshape({rows, dims_.value_heads * dims_.value_dim}));
}

}  // namespace specd::model
