// The entry points: each checks what every backend relies on (a projection's input width, the
// delta rule's shapes), then runs what the op table holds for its first input's device.
#include "common/model/ops/ops.h"

#include "common/model/ops/op_table.h"

namespace specd::model::ops {

at::Tensor Project(const at::Tensor& x, const at::Tensor& weight) {
  return OpsFor(x.device().type()).project(x, weight);
}

at::Tensor ProjectInt4(const at::Tensor& x, const quant::Int4KernelWeight& weight) {
  TORCH_CHECK(x.size(-1) == weight.cols(), "W4A16 projection expects ", weight.cols(),
              " input features, got ", x.size(-1));
  return OpsFor(x.device().type()).project_int4(x, weight);
}

at::Tensor ProjectInt4(const at::Tensor& x, const Int4Tensors& weight) {
  TORCH_CHECK(x.size(-1) == weight.cols(), "W4A16 projection expects ", weight.cols(),
              " input features, got ", x.size(-1));
  return OpsFor(x.device().type()).project_int4_tensors(x, weight);
}

at::Tensor ProjectInt8(const at::Tensor& x, const kernels::cpu::VnniMatrix& weight) {
  TORCH_CHECK(x.size(-1) == weight.cols, "int8 projection expects ", weight.cols,
              " input features, got ", x.size(-1));
  return OpsFor(x.device().type()).project_int8(x, weight);
}

namespace {

void CheckDeltaRuleShapes(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& g, const at::Tensor& beta,
                          const at::Tensor& initial_state, const at::Tensor& final_state) {
  const int64_t tokens = q.size(0), heads = q.size(1);
  TORCH_CHECK(k.sizes() == q.sizes() && v.size(0) == tokens && v.size(1) == heads &&
                  g.sizes() == at::IntArrayRef({tokens, heads}) && beta.sizes() == g.sizes() &&
                  final_state.sizes() == at::IntArrayRef({heads, q.size(2), v.size(2)}) &&
                  initial_state.sizes() == final_state.sizes(),
              "GatedDeltaRule: inconsistent shapes");
}

}  // namespace

at::Tensor RecurrentGatedDeltaRule(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const at::Tensor& g, const at::Tensor& beta,
                                   const at::Tensor& initial_state, at::Tensor& final_state) {
  CheckDeltaRuleShapes(q, k, v, g, beta, initial_state, final_state);
  return OpsFor(q.device().type())
      .recurrent_gated_delta_rule(q, k, v, g, beta, initial_state, final_state);
}

at::Tensor ChunkedGatedDeltaRule(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& g, const at::Tensor& beta,
                                 const at::Tensor& initial_state, at::Tensor& final_state,
                                 int64_t chunk_size) {
  CheckDeltaRuleShapes(q, k, v, g, beta, initial_state, final_state);
  return OpsFor(q.device().type())
      .chunked_gated_delta_rule(q, k, v, g, beta, initial_state, final_state, chunk_size);
}

at::Tensor GatedDeltaRule(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& g, const at::Tensor& beta,
                          std::span<const DeltaRuleSequence> sequences) {
  // The shapes hold for every sequence's rows where they hold for all of them: checked without
  // taking views of the rows (five per sequence and layer of a batched step).
  int64_t row = 0;
  for (const DeltaRuleSequence& sequence : sequences) {
    CheckDeltaRuleShapes(q, k, v, g, beta, sequence.initial_state, sequence.final_state);
    const int64_t stored = sequence.stored_length.value_or(sequence.length);
    TORCH_CHECK(stored >= 0 && stored <= sequence.length, "GatedDeltaRule: a sequence of ",
                sequence.length, " rows cannot store the state after ", stored);
    row += sequence.length;
  }
  TORCH_CHECK(row == q.size(0), "GatedDeltaRule: the sequences take ", row, " of ", q.size(0),
              " rows");
  return OpsFor(q.device().type()).batched_gated_delta_rule(q, k, v, g, beta, sequences);
}

DeltaRuleGates GatedDeltaNetGates(const at::Tensor& a, const at::Tensor& b, const at::Tensor& a_log,
                                  const at::Tensor& dt_bias) {
  TORCH_CHECK(a.dim() == 2 && b.sizes() == a.sizes() &&
                  a_log.sizes() == at::IntArrayRef({a.size(1)}) && dt_bias.sizes() == a_log.sizes(),
              "GatedDeltaNetGates: inconsistent shapes");
  return OpsFor(a.device().type()).gated_delta_net_gates(a, b, a_log, dt_bias);
}

at::Tensor Attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const Visibility& visibility) {
  return OpsFor(q.device().type()).attention(q, k, v, visibility);
}

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps, NormWeight kind) {
  return OpsFor(x.device().type()).rms_norm(x, weight, eps, kind);
}

at::Tensor GatedRmsNorm(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& weight,
                        double eps) {
  return OpsFor(x.device().type()).gated_rms_norm(x, gate, weight, eps);
}

at::Tensor SiluMul(const at::Tensor& gate, const at::Tensor& up) {
  return OpsFor(gate.device().type()).silu_mul(gate, up);
}

at::Tensor RowArgmax(const at::Tensor& x) { return OpsFor(x.device().type()).row_argmax(x); }

at::Tensor TruncatedSoftmax(const at::Tensor& scores, const Truncation& truncation) {
  return OpsFor(scores.device().type()).truncated_softmax(scores, truncation);
}

int64_t InverseCdf(const at::Tensor& probabilities, double u) {
  return OpsFor(probabilities.device().type()).inverse_cdf(probabilities, u);
}

at::Tensor Rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  return OpsFor(x.device().type()).rotary(x, cos, sin);
}

at::Tensor CausalConv1d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& state) {
  return OpsFor(x.device().type()).causal_conv1d(x, weight, state);
}

at::Tensor CausalConv1dAdvance(const at::Tensor& x, const at::Tensor& weight,
                               std::span<const ConvSequence> sequences) {
  int64_t rows = 0;
  for (const ConvSequence& sequence : sequences) {
    TORCH_CHECK(sequence.state.dim() == 2 && sequence.state.size(0) == weight.size(1) - 1 &&
                    sequence.state.size(1) == x.size(1),
                "CausalConv1dAdvance: a state of ", sequence.state.sizes(), " for a kernel of ",
                weight.sizes());
    rows += sequence.length;
  }
  TORCH_CHECK(rows == x.size(0), "CausalConv1dAdvance: the sequences take ", rows, " of ",
              x.size(0), " rows");
  return OpsFor(x.device().type()).causal_conv1d_advance(x, weight, sequences);
}

}  // namespace specd::model::ops
