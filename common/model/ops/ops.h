#pragma once
// The model's hot operations, each declared once here. Layers call these; each runs the op of the
// backend registered for its input's device (op_table.h), or the LibTorch reference where that
// backend has none. Every backend is checked against the reference on every op and shape,
// Qwen3.5-4B's included (tests/unit/common/model/ops/backend_ops_test.cc).
//
// Dtypes: activations in the model dtype (float32 on CPU, bf16 on CUDA); statistics, softmax and
// the Gated DeltaNet state in float32 whatever the activations.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <span>
#include <utility>

#include "common/int4/int4_kernel_weight.h"
#include "common/model/ops/int4_tensors.h"
#include "kernels/cpu/vnni_gemm.h"

namespace specd::model::ops {

// y = x Wᵀ for a dense weight [out, in]: x [..., in] → [..., out] in x's dtype. The weight is in
// x's dtype, or stored narrower (a bf16 checkpoint's matrices on a float32 model, never widened in
// memory). A fake-quant weight (QAD) is a dense one, Q(W) with its straight-through gradient.
at::Tensor Project(const at::Tensor& x, const at::Tensor& weight);
// y = x Wᵀ for a W4A16 weight (INT4 codes with group scales, laid out at load): x [..., in] →
// [..., out] in x's dtype.
at::Tensor ProjectInt4(const at::Tensor& x, const quant::Int4KernelWeight& weight);
// The same for a W4A16 weight held in tensors on x's device (a GPU's; int4_tensors.h).
at::Tensor ProjectInt4(const at::Tensor& x, const Int4Tensors& weight);
// y = x Wᵀ for a weight rounded to 8 bits per row (the optional int8 LM head), in the layout the
// CPU's VNNI kernel reads (kernels/cpu/vnni_gemm.h): x [..., in] float32 → [..., out] float32.
at::Tensor ProjectInt8(const at::Tensor& x, const kernels::cpu::VnniMatrix& weight);

// The gated delta rule, the recurrence at the heart of Gated DeltaNet, per value head:
//   S_t = exp(g_t) · (I − β_t k_t k_tᵀ) · S_{t−1} + β_t k_t v_tᵀ,    o_t = S_tᵀ q_t
// q, k [T, heads, key_dim] (q l2-normalised and scaled by key_dim^-1/2, k l2-normalised),
// v [T, heads, value_dim], g (log decay, ≤ 0) and beta [T, heads], all float32; states
// [heads, key_dim, value_dim] float32. Returns o [T, heads, value_dim] and writes the state after
// the last token into `final_state`, which may be `initial_state` itself. Two forms of the same
// function: token by token (decode), and chunked (WY representation; a prefill or a verify block
// as matrix products, differentiable for training).
inline constexpr int64_t kDeltaRuleChunkSize = 64;
at::Tensor RecurrentGatedDeltaRule(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const at::Tensor& g, const at::Tensor& beta,
                                   const at::Tensor& initial_state, at::Tensor& final_state);
at::Tensor ChunkedGatedDeltaRule(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& g, const at::Tensor& beta,
                                 const at::Tensor& initial_state, at::Tensor& final_state,
                                 int64_t chunk_size = kDeltaRuleChunkSize);

// The delta rule over several sequences in one call (a batch of decode steps, verify blocks and
// prefill chunks), the same as one of the calls above per sequence: sequence s takes `length`
// consecutive rows of q … beta (the sequences back to back, in order) from its initial into its
// final state, in the chunked form where `chunked` and token by token elsewhere. Returns o for
// every row.
struct DeltaRuleSequence {
  int64_t length = 0;
  at::Tensor initial_state;
  at::Tensor final_state;  // written; may be initial_state itself
  bool chunked = false;
  // How many of the rows the state written to `final_state` is after: all of them where unset.
  // Fewer for a verify block, whose acceptance is not known yet: it stores the state after the
  // rows it replays first (the accepted part of the sequence's last block; none: nothing is
  // written), and the state after its own rows is not kept.
  std::optional<int64_t> stored_length = std::nullopt;
};
at::Tensor GatedDeltaRule(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& g, const at::Tensor& beta,
                          std::span<const DeltaRuleSequence> sequences);

// The delta rule's g and beta from a Gated DeltaNet layer's projections a, b [T, heads] float32:
// g = −exp(a_log) · softplus(a + dt_bias), beta = sigmoid(b), with a_log, dt_bias [heads].
struct DeltaRuleGates {
  at::Tensor g;     // [T, heads]
  at::Tensor beta;  // [T, heads]
};
DeltaRuleGates GatedDeltaNetGates(const at::Tensor& a, const at::Tensor& b, const at::Tensor& a_log,
                                  const at::Tensor& dt_bias);

// Which keys each query sees. Queries sit at absolute positions [query_start, query_start + Tq),
// keys at [key_start, key_start + Tk).
struct Visibility {
  enum class Rule {
    kAll,     // every key: the drafter's block over its context
    kCausal,  // keys at or before the query: the target
    kWindow,  // keys closer than `window` on either side: the drafter's symmetric window
    kMask,    // `mask` [Tq, Tk] (bool, true = visible): training's block masks
  };
  Rule rule = Rule::kAll;
  int64_t query_start = 0;
  int64_t key_start = 0;
  int64_t window = 0;
  at::Tensor mask;

  static Visibility All() { return {}; }
  static Visibility Causal(int64_t query_start) {
    return {
        .rule = Rule::kCausal, .query_start = query_start, .key_start = 0, .window = 0, .mask = {}};
  }
  static Visibility Window(int64_t query_start, int64_t key_start, int64_t window) {
    return {.rule = Rule::kWindow,
            .query_start = query_start,
            .key_start = key_start,
            .window = window,
            .mask = {}};
  }
  static Visibility Mask(at::Tensor mask) {
    return {.rule = Rule::kMask,
            .query_start = 0,
            .key_start = 0,
            .window = 0,
            .mask = std::move(mask)};
  }
};

// The keys each of `queries` queries may not see among `keys` keys, [queries, keys] bool on
// `device`; undefined when it sees them all. Every backend reads a Visibility through it.
at::Tensor Hidden(const Visibility& visibility, int64_t queries, int64_t keys,
                  const at::Device& device);

// softmax(q kᵀ / √head_dim) v over the keys each query sees. q [Tq, heads, head_dim]; k, v
// [kv_heads, Tk, head_dim] with heads a multiple of kv_heads (GQA: query head h reads kv head
// h / (heads / kv_heads)). Scores and softmax in float32; returns [Tq, heads, head_dim] in q's
// dtype.
at::Tensor Attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const Visibility& visibility);

// How an RMS norm's weight scales the normalised x.
enum class NormWeight {
  kZeroCentred,  // (1 + w), in float32 before the cast back (Qwen3.5's norms)
  kPlain,        // w, after the cast back (Qwen3's: the DFlash drafter)
};
// x / rms(x) over the last dimension, scaled by `weight` [dim]; x's dtype.
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps, NormWeight kind);
// (x / rms(x) · w) · silu(gate): the Gated DeltaNet output norm over the last dimension (a value
// head); x's dtype.
at::Tensor GatedRmsNorm(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& weight,
                        double eps);

// silu(gate) · up, elementwise: the SwiGLU MLP's activation; gate and up of one shape and dtype.
at::Tensor SiluMul(const at::Tensor& gate, const at::Tensor& up);

// Each row's column of its largest entry, x [rows, n] float32 → [rows] int64 on x's device: the
// tokens greedy decoding takes from logits. The first of equal entries wins, and a NaN (the first)
// beats every number, as at::argmax.
at::Tensor RowArgmax(const at::Tensor& x);

// How sampling narrows a row's distribution, in this order: top-k, top-p, min-p.
struct Truncation {
  double temperature = 1;  // > 0
  int64_t top_k = 0;       // the k largest scores, and every one equal to the k-th (0: all)
  // The smallest set of the most likely tokens whose mass reaches top_p (1: all); among equal
  // probabilities the lower index ranks first.
  double top_p = 1;
  double min_p = 0;  // those of at least min_p × the largest probability
};
// softmax(scores / temperature) over what `truncation` keeps, renormalised: scores [n] float32 →
// [n] float32 on their device, the distribution a sampled token is drawn from. A score of −∞ gets
// none of the mass.
at::Tensor TruncatedSoftmax(const at::Tensor& scores, const Truncation& truncation);
// The index a uniform u ∈ [0, 1) draws from probabilities [n] (summing to 1): the first whose
// cumulative sum exceeds u, or the last with mass where rounding leaves u past them all.
int64_t InverseCdf(const at::Tensor& probabilities, double u);

// Rotary position embedding, rotate-half style, on the first rotary_dim dims of each head of
// x [T, heads, head_dim]; cos, sin [T, rotary_dim] are the positions' angles (rotary_dim ≤
// head_dim: the rest of each head passes through).
at::Tensor Rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

// Depthwise causal convolution over time: out_t[c] = Σ_j w[c, j] · x_{t−K+1+j}[c], with the
// inputs before x from `state`. x [T, C]; weight [C, K]; state [K−1, C], the previous inputs
// oldest first (not changed). Accumulates in float32; returns [T, C] in x's dtype.
at::Tensor CausalConv1d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& state);
// The Gated DeltaNet's conv step: CausalConv1d over several sequences in one call, then silu (its
// activation), each sequence then advanced: sequence s takes `length` consecutive rows of x (back
// to back, in order) from its state, which then becomes the last K−1 rows of [state ‖ its rows].
// Returns [rows, C], as silu of one CausalConv1d per sequence would.
struct ConvSequence {
  int64_t length = 0;
  at::Tensor state;  // [K−1, C] in x's dtype, advanced in place
};
at::Tensor CausalConv1dAdvance(const at::Tensor& x, const at::Tensor& weight,
                               std::span<const ConvSequence> sequences);

}  // namespace specd::model::ops
