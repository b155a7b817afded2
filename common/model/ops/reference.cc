// The reference backend: every op as LibTorch compositions, the model's own arithmetic before
// any kernel (the ground truth every backend is tested against). Runs on any device and records
// gradients, so training runs here.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/model/ops/op_table.h"

namespace specd::model::ops {
namespace {
namespace composition {

// A single row (a decode step) takes a matrix-vector product: BLAS sgemm with one row first packs
// (copies) the whole weight, which makes a memory-bound step move about three times its bytes. A
// weight stored narrower than x (a bf16 checkpoint on a float32 model) is widened to x's dtype.
at::Tensor Project(const at::Tensor& x, const at::Tensor& stored) {
  const at::Tensor weight = stored.to(x.scalar_type());
  if (x.numel() != x.size(-1)) return at::linear(x, weight);
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.size(0);
  return at::mv(weight, x.reshape({-1})).view(shape);
}

// Through the dense weight the codes stand for: exact, and slow (a test's yardstick).
at::Tensor ProjectInt4(const at::Tensor& x, const quant::Int4KernelWeight& weight) {
  std::vector<float> dense = weight.Dequantize();
  const at::Tensor w = at::from_blob(dense.data(), {weight.rows(), weight.cols()}, at::kFloat)
                           .to(x.device(), /*non_blocking=*/false, /*copy=*/true);
  return at::linear(x.to(at::kFloat), w).to(x.scalar_type());
}

// The codes unpacked and scaled by tensor ops on the weight's device, x gathered into the
// weight's column order.
at::Tensor ProjectInt4Tensors(const at::Tensor& x, const Int4Tensors& weight) {
  const at::Tensor shifts = at::arange(0, 32, 4, weight.packed.options());
  at::Tensor codes =
      at::bitwise_and(at::bitwise_right_shift(weight.packed.unsqueeze(-1), shifts), 15)
          .view({weight.rows(), weight.cols()})
          .to(at::kFloat) -
      quant::kInt4NibbleOffset;
  if (weight.zero_points.defined()) {
    codes -= weight.zero_points.to(at::kFloat).repeat_interleave(weight.group_size, 1);
  }
  const at::Tensor dense =
      codes * weight.scales.to(at::kFloat).repeat_interleave(weight.group_size, 1);
  const at::Tensor input =
      weight.input_order.defined() ? x.index_select(-1, weight.input_order) : x;
  return at::linear(input.to(at::kFloat), dense).to(x.scalar_type());
}

at::Tensor ProjectInt8(const at::Tensor& x, const kernels::cpu::VnniMatrix& weight) {
  std::vector<float> dense = kernels::cpu::Dequantize(weight);
  const at::Tensor w = at::from_blob(dense.data(), {weight.rows, weight.cols}, at::kFloat)
                           .to(x.device(), /*non_blocking=*/false, /*copy=*/true);
  return at::linear(x.to(at::kFloat), w);
}

at::Tensor RecurrentGatedDeltaRule(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const at::Tensor& g, const at::Tensor& beta,
                                   const at::Tensor& initial_state, at::Tensor& final_state) {
  at::Tensor& state = final_state;  // [H, Dk, Dv], updated in place token by token
  const int64_t length = q.size(0);
  at::Tensor out = at::empty({length, v.size(1), v.size(2)}, v.options());
  for (int64_t t = 0; t < length; ++t) {
    const at::Tensor k_t = k[t].unsqueeze(1);  // [H, 1, Dk]
    // The first token reads the initial state, so it never needs copying.
    at::mul_out(state, t == 0 ? initial_state : state, g[t].exp().view({-1, 1, 1}));
    const at::Tensor remembered = at::bmm(k_t, state).squeeze(1);  // kᵀS: [H, Dv]
    const at::Tensor delta = (v[t] - remembered) * beta[t].unsqueeze(1);
    state.baddbmm_(k_t.transpose(1, 2), delta.unsqueeze(1));  // S += k ⊗ delta
    out.select(0, t).copy_(at::bmm(q[t].unsqueeze(1), state).squeeze(1));
  }
  return out;
}

struct ChunkResult {
  at::Tensor out;         // [H, c, Dv]
  at::Tensor next_state;  // [H, Dk, Dv]
};

// One chunk of c ≤ chunk_size tokens, head-major ([H, c, D]), from `state`. Out of place, so
// that autograd can differentiate a whole sequence through its chunks (training).
ChunkResult ChunkStep(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const at::Tensor& g, const at::Tensor& beta, const at::Tensor& state) {
  const int64_t c = q.size(1);
  const at::Tensor gamma = g.cumsum(-1);  // [H, c], cumulative log decay within the chunk
  // Γ[i, j] = exp(γ_i − γ_j) for j ≤ i, else 0 (masked before exp: the upper part overflows).
  const at::Tensor causal = at::ones({c, c}, q.options().dtype(at::kBool)).tril();
  const at::Tensor decay =
      (gamma.unsqueeze(-1) - gamma.unsqueeze(-2))
          .masked_fill(causal.logical_not(), -std::numeric_limits<float>::infinity())
          .exp();
  const at::Tensor k_beta = k * beta.unsqueeze(-1);
  const at::Tensor v_beta = v * beta.unsqueeze(-1);
  // T = (I + strict_lower((Kβ Kᵀ) ⊙ Γ))⁻¹; the solver takes the unit diagonal as given.
  const at::Tensor a = (at::matmul(k_beta, k.transpose(-1, -2)) * decay).tril(-1);
  const at::Tensor t_inv =
      at::linalg_solve_triangular(a, at::eye(c, q.options()), /*upper=*/false, /*left=*/true,
                                  /*unitriangular=*/true);
  const at::Tensor exp_gamma = gamma.exp().unsqueeze(-1);  // [H, c, 1]
  const at::Tensor u = at::matmul(t_inv, v_beta);          // values with intra-chunk deltas
  const at::Tensor w = at::matmul(t_inv, k_beta * exp_gamma);
  const at::Tensor v_new = u - at::matmul(w, state);
  const at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) * decay;
  const at::Tensor out = at::matmul(q * exp_gamma, state) + at::matmul(scores, v_new);
  const at::Tensor gamma_last = gamma.narrow(-1, c - 1, 1);  // [H, 1]
  const at::Tensor k_decayed = k * (gamma_last - gamma).exp().unsqueeze(-1);
  return {.out = out,
          .next_state = state * gamma_last.exp().unsqueeze(-1) +
                        at::matmul(k_decayed.transpose(-1, -2), v_new)};
}

at::Tensor ChunkedGatedDeltaRule(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& g, const at::Tensor& beta,
                                 const at::Tensor& initial_state, at::Tensor& final_state,
                                 int64_t chunk_size) {
  // Head-major, so every chunk's products are batched over heads.
  const at::Tensor qh = q.transpose(0, 1), kh = k.transpose(0, 1), vh = v.transpose(0, 1);
  const at::Tensor gh = g.transpose(0, 1), bh = beta.transpose(0, 1);
  const int64_t length = q.size(0);
  std::vector<at::Tensor> outputs;
  // Autograd keeps the starting state for the backward, and final_state may be the very buffer
  // it lives in (overwritten below): training starts from a copy.
  const bool recorded = at::GradMode::is_enabled() && (q.requires_grad() || v.requires_grad());
  at::Tensor state = recorded ? initial_state.clone() : initial_state;
  for (int64_t start = 0; start < length; start += chunk_size) {
    const int64_t c = std::min(chunk_size, length - start);
    ChunkResult chunk =
        ChunkStep(qh.narrow(1, start, c), kh.narrow(1, start, c), vh.narrow(1, start, c),
                  gh.narrow(1, start, c), bh.narrow(1, start, c), state);
    outputs.push_back(std::move(chunk.out));
    state = std::move(chunk.next_state);
  }
  final_state.copy_(state);
  return at::cat(outputs, 1).transpose(0, 1);  // [T, H, Dv]
}

at::Tensor Attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const Visibility& visibility) {
  const int64_t queries = q.size(0), heads = q.size(1), head_dim = q.size(2);
  const int64_t kv_heads = k.size(0);
  // Query heads that share a KV head are stacked, so GQA is one batched product per KV head.
  const int64_t group = heads / kv_heads;
  const at::Tensor grouped_q = q.permute({1, 0, 2}).reshape({kv_heads, group * queries, head_dim});
  at::Tensor scores = at::matmul(grouped_q, k.transpose(1, 2)).to(at::kFloat) /
                      std::sqrt(static_cast<double>(head_dim));
  if (const at::Tensor hidden = ops::Hidden(visibility, queries, k.size(1), q.device());
      hidden.defined()) {
    scores = scores.masked_fill(hidden.repeat({group, 1}), -std::numeric_limits<float>::infinity());
  }
  const at::Tensor probs = at::softmax(scores, -1).to(q.scalar_type());
  return at::matmul(probs, v)  // [kv_heads, group * Tq, head_dim]
      .view({heads, queries, head_dim})
      .permute({1, 0, 2});
}

at::Tensor NormalisedFloat32(const at::Tensor& x, double eps) {
  const at::Tensor x32 = x.to(at::kFloat);
  return x32 * at::rsqrt(x32.square().mean(-1, /*keepdim=*/true) + eps);
}

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps, NormWeight kind) {
  if (kind == NormWeight::kZeroCentred) {
    // Scaled in float32 before the cast back, as Qwen3.5's reference does (not Llama's order).
    return (NormalisedFloat32(x, eps) * (weight.to(at::kFloat) + 1.0)).to(x.scalar_type());
  }
  // transformers' Qwen3RMSNorm casts back before scaling: w · normed.to(input dtype).
  return (weight * NormalisedFloat32(x, eps).to(x.scalar_type())).to(x.scalar_type());
}

at::Tensor GatedRmsNorm(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& weight,
                        double eps) {
  const at::Tensor normed = weight * NormalisedFloat32(x, eps).to(x.scalar_type());
  return (normed * at::silu(gate.to(at::kFloat))).to(x.scalar_type());
}

at::Tensor SiluMul(const at::Tensor& gate, const at::Tensor& up) { return at::silu(gate) * up; }

DeltaRuleGates GatedDeltaNetGates(const at::Tensor& a, const at::Tensor& b, const at::Tensor& a_log,
                                  const at::Tensor& dt_bias) {
  return {.g = -a_log.exp() * at::softplus(a + dt_bias), .beta = at::sigmoid(b)};
}

at::Tensor RowArgmax(const at::Tensor& x) { return x.argmax(-1); }

// In double: float32's sum over a vocabulary is off by ~1e-5, enough to move a top-p cut.
at::Tensor TruncatedSoftmax(const at::Tensor& scores, const Truncation& truncation) {
  at::Tensor scaled = scores.to(at::kDouble) / truncation.temperature;
  const int64_t n = scaled.size(0);
  if (truncation.top_k > 0 && truncation.top_k < n) {
    const at::Tensor kth =
        std::get<0>(scaled.topk(truncation.top_k)).select(0, truncation.top_k - 1);
    scaled.masked_fill_(scaled < kth, -std::numeric_limits<double>::infinity());
  }
  at::Tensor probs = at::softmax(scaled, 0);
  if (truncation.top_p < 1) {
    // Stable: equal probabilities keep their order, the lower index ranked first.
    const auto [sorted, order] = probs.sort(/*stable=*/true, /*dim=*/0, /*descending=*/true);
    // A token stays while the tokens ranked above it hold less than top_p; the first always does.
    // Scattered back through the permutation: no result sized by the data, so no host sync on a
    // device.
    const at::Tensor above = sorted.cumsum(0) - sorted;
    probs = probs.scatter(0, order, sorted.masked_fill(above >= truncation.top_p, 0.0));
  }
  if (truncation.min_p > 0) probs.masked_fill_(probs < probs.max() * truncation.min_p, 0.0);
  return (probs / probs.sum()).to(at::kFloat);
}

int64_t InverseCdf(const at::Tensor& probabilities, double u) {
  const at::Tensor cumulative = probabilities.to(at::kDouble).cumsum(0);  // as TruncatedSoftmax's
  const at::Tensor at_u = at::full({1}, u, cumulative.options());
  const int64_t index =
      at::searchsorted(cumulative, at_u, /*out_int32=*/false, /*right=*/true).item<int64_t>();
  if (index < cumulative.size(0)) return index;
  const at::Tensor with_mass = (probabilities > 0).nonzero();
  return with_mass.numel() == 0 ? 0 : with_mass.max().item<int64_t>();
}

at::Tensor Rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t rotary_dim = cos.size(-1);
  const int64_t half = rotary_dim / 2;
  const at::Tensor rot = x.narrow(-1, 0, rotary_dim);
  const at::Tensor rotated_half =
      at::cat({-rot.narrow(-1, half, half), rot.narrow(-1, 0, half)}, -1);
  // Broadcast over heads.
  const at::Tensor out = rot * cos.unsqueeze(1) + rotated_half * sin.unsqueeze(1);
  if (rotary_dim == x.size(-1)) return out;
  return at::cat({out, x.narrow(-1, rotary_dim, x.size(-1) - rotary_dim)}, -1);
}

at::Tensor CausalConv1d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& state) {
  // Summed in float32, as a convolution kernel accumulates, whatever the activation dtype.
  const at::Tensor window = at::cat({state, x}, 0).to(at::kFloat);  // [K − 1 + T, C]
  const at::Tensor taps = weight.to(at::kFloat);
  const int64_t length = x.size(0);
  at::Tensor out = window.narrow(0, 0, length) * taps.select(1, 0);
  for (int64_t j = 1; j < taps.size(1); ++j) {
    out.addcmul_(window.narrow(0, j, length), taps.select(1, j));
  }
  return out.to(x.scalar_type());
}

// One single-sequence op per sequence, the device's own (a backend's kernel where it has one).
at::Tensor BatchedGatedDeltaRule(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& g, const at::Tensor& beta,
                                 std::span<const DeltaRuleSequence> sequences) {
  const OpTable& ops = OpsFor(q.device().type());
  std::vector<at::Tensor> outputs;
  int64_t row = 0;
  for (const DeltaRuleSequence& sequence : sequences) {
    // Rows [first, first + count) of this sequence from state `from` into `to`.
    const auto run = [&](int64_t first, int64_t count, const at::Tensor& from, at::Tensor& to) {
      const auto rows = [&](const at::Tensor& t) { return t.narrow(0, row + first, count); };
      outputs.push_back(
          sequence.chunked ? ops.chunked_gated_delta_rule(rows(q), rows(k), rows(v), rows(g),
                                                          rows(beta), from, to, kDeltaRuleChunkSize)
                           : ops.recurrent_gated_delta_rule(rows(q), rows(k), rows(v), rows(g),
                                                            rows(beta), from, to));
    };
    const int64_t stored = sequence.stored_length.value_or(sequence.length);
    at::Tensor final_state = sequence.final_state;
    if (stored > 0) run(0, stored, sequence.initial_state, final_state);
    if (stored < sequence.length) {
      at::Tensor unkept = at::empty_like(final_state);
      run(stored, sequence.length - stored, stored > 0 ? final_state : sequence.initial_state,
          unkept);
    }
    row += sequence.length;
  }
  return outputs.size() == 1 ? outputs.front() : at::cat(outputs, 0);
}

at::Tensor CausalConv1dAdvance(const at::Tensor& x, const at::Tensor& weight,
                               std::span<const ConvSequence> sequences) {
  const OpTable& ops = OpsFor(x.device().type());
  std::vector<at::Tensor> outputs;
  int64_t row = 0;
  for (const ConvSequence& sequence : sequences) {
    const at::Tensor rows = x.narrow(0, row, sequence.length);
    outputs.push_back(ops.causal_conv1d(rows, weight, sequence.state));
    const at::Tensor window = at::cat({sequence.state, rows}, 0);
    const int64_t kept = sequence.state.size(0);
    sequence.state.copy_(window.narrow(0, window.size(0) - kept, kept));
    row += sequence.length;
  }
  return at::silu(outputs.size() == 1 ? outputs.front() : at::cat(outputs, 0));
}

}  // namespace composition
}  // namespace

at::Tensor Hidden(const Visibility& visibility, int64_t queries, int64_t keys,
                  const at::Device& device) {
  using Rule = Visibility::Rule;
  if (visibility.rule == Rule::kAll) return {};
  if (visibility.rule == Rule::kMask) return visibility.mask.logical_not();
  const auto long_options = at::TensorOptions().dtype(at::kLong).device(device);
  const int64_t key_end = visibility.key_start + keys;
  if (visibility.rule == Rule::kCausal && key_end <= visibility.query_start + 1) return {};
  const at::Tensor query_positions =
      at::arange(visibility.query_start, visibility.query_start + queries, long_options);
  const at::Tensor key_positions = at::arange(visibility.key_start, key_end, long_options);
  if (visibility.rule == Rule::kCausal) {
    return key_positions.unsqueeze(0) > query_positions.unsqueeze(1);
  }
  return (key_positions.unsqueeze(0) - query_positions.unsqueeze(1)).abs() >= visibility.window;
}

const OpTable& ReferenceOps() {
  static const OpTable table{.project = &composition::Project,
                             .project_int4 = &composition::ProjectInt4,
                             .project_int4_tensors = &composition::ProjectInt4Tensors,
                             .project_int8 = &composition::ProjectInt8,
                             .recurrent_gated_delta_rule = &composition::RecurrentGatedDeltaRule,
                             .chunked_gated_delta_rule = &composition::ChunkedGatedDeltaRule,
                             .batched_gated_delta_rule = &composition::BatchedGatedDeltaRule,
                             .gated_delta_net_gates = &composition::GatedDeltaNetGates,
                             .attention = &composition::Attention,
                             .rms_norm = &composition::RmsNorm,
                             .gated_rms_norm = &composition::GatedRmsNorm,
                             .silu_mul = &composition::SiluMul,
                             .row_argmax = &composition::RowArgmax,
                             .truncated_softmax = &composition::TruncatedSoftmax,
                             .inverse_cdf = &composition::InverseCdf,
                             .rotary = &composition::Rotary,
                             .causal_conv1d = &composition::CausalConv1d,
                             .causal_conv1d_advance = &composition::CausalConv1dAdvance};
  return table;
}

}  // namespace specd::model::ops
