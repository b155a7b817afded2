// The kernels/cpu backend: turns tensors into pointers and shapes, and hands a case the kernels do
// not cover (another dtype, a layout they do not take, a gradient to record) to the reference.
#include "common/model/ops/cpu_backend.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <span>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/available_cpus.h"
#include "kernels/cpu/causal_conv1d.h"
#include "kernels/cpu/delta_rule_gates.h"
#include "kernels/cpu/dense_gemm.h"
#include "kernels/cpu/gated_delta_rule.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/row_argmax.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cpu/silu_mul.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/vnni_gemm.h"

namespace specd::model::ops {
namespace {
namespace kernels_cpu {

// Whether the kernels take these inputs: float32, and no gradient to record (the kernels are
// not differentiable; training goes through the reference).
bool KernelsTake(std::initializer_list<const at::Tensor*> tensors) {
  for (const at::Tensor* tensor : tensors) {
    if (tensor->scalar_type() != at::kFloat) return false;
    if (tensor->requires_grad() && at::GradMode::is_enabled()) return false;
  }
  return true;
}

// float32 rows against a contiguous float32 or bf16 weight, as many as there are: a row's sums
// run in one order whatever rows come with it, so a verify block's logits are bitwise those of
// decode steps (BLAS sums a row differently at one row and at several), and neither a decode
// step's GEMV (BLAS would first pack, i.e. copy, the whole weight) nor a bf16 weight (BLAS
// would need it widened) pays a copy.
at::Tensor Project(const at::Tensor& x, const at::Tensor& weight) {
  const bool bf16 = weight.scalar_type() == at::kBFloat16;
  const int64_t rows = x.size(-1) == 0 ? 0 : x.numel() / x.size(-1);
  const bool recorded = weight.requires_grad() && at::GradMode::is_enabled();
  const bool takes =
      KernelsTake({&x}) && weight.is_contiguous() && (bf16 ? !recorded : KernelsTake({&weight}));
  if (!takes) return ReferenceOps().project(x, weight);
  TORCH_CHECK(weight.dim() == 2 && weight.size(1) == x.size(-1), "Project: weight ", weight.sizes(),
              " does not take ", x.size(-1), " input features");
  const at::Tensor input = x.contiguous();
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.size(0);
  at::Tensor y = at::empty(shape, x.options());
  kernels::cpu::DenseGemm(
      input.data_ptr<float>(), rows,
      {.data = weight.data_ptr(), .bf16 = bf16, .rows = weight.size(0), .cols = weight.size(1)},
      y.data_ptr<float>());
  return y;
}

// The fused W4A16 kernel on float32 activations: a bfloat16 model converts the (small)
// activations at its edges, never the weight.
at::Tensor ProjectInt4(const at::Tensor& x, const quant::Int4KernelWeight& weight) {
  const at::Tensor input = x.to(at::kFloat).contiguous();
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.rows();
  at::Tensor y = at::empty(shape, input.options());
  weight.Multiply(input.data_ptr<float>(), input.numel() / weight.cols(), y.data_ptr<float>());
  return y.to(x.scalar_type());
}

// The VNNI-layout kernel on float32 activations (rounded to int8 inside it), where the CPU runs it.
at::Tensor ProjectInt8(const at::Tensor& x, const kernels::cpu::VnniMatrix& weight) {
  if (!KernelsTake({&x}) || kernels::cpu::BestVnniGemmIsa() == kernels::cpu::VnniGemmIsa::kNone) {
    return ReferenceOps().project_int8(x, weight);
  }
  const at::Tensor input = x.contiguous();
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.rows;
  at::Tensor y = at::empty(shape, input.options());
  kernels::cpu::VnniGemm(input.data_ptr<float>(), input.numel() / weight.cols, weight,
                         y.data_ptr<float>());
  return y;
}

// The keys each query sees, as runs; empty when a mask rules (not a run) or some query sees none.
std::vector<kernels::cpu::KeyRange> KeyRanges(const Visibility& visibility, int64_t queries,
                                              int64_t keys) {
  using Rule = Visibility::Rule;
  if (visibility.rule == Rule::kMask) return {};
  std::vector<kernels::cpu::KeyRange> ranges(queries, {.begin = 0, .end = keys});
  for (int64_t i = 0; i < queries; ++i) {
    const int64_t position = visibility.query_start + i - visibility.key_start;
    kernels::cpu::KeyRange& range = ranges[i];
    if (visibility.rule == Rule::kCausal) range.end = std::min(keys, position + 1);
    if (visibility.rule == Rule::kWindow) {
      range.begin = std::max<int64_t>(0, position - visibility.window + 1);
      range.end = std::min(keys, position + visibility.window);
    }
    if (range.begin >= range.end) return {};
  }
  return ranges;
}

// The fused kernel (no score tensor) for every visibility but a mask; K and V may be a cache's
// views, rows of head_dim contiguous, heads a capacity apart.
at::Tensor Attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const Visibility& visibility) {
  const kernels::cpu::AttentionShape shape{.queries = q.size(0),
                                           .heads = q.size(1),
                                           .kv_heads = k.size(0),
                                           .head_dim = q.size(2),
                                           .kv_head_stride = k.stride(0)};
  const auto rows_contiguous = [&](const at::Tensor& t) {
    return t.stride(2) == 1 && t.stride(1) == shape.head_dim && t.stride(0) == shape.kv_head_stride;
  };
  const std::vector<kernels::cpu::KeyRange> ranges =
      KernelsTake({&q, &k, &v}) ? KeyRanges(visibility, shape.queries, k.size(1))
                                : std::vector<kernels::cpu::KeyRange>{};
  if (ranges.empty() || shape.queries == 0 || !rows_contiguous(k) || !rows_contiguous(v) ||
      k.sizes() != v.sizes() || k.size(2) != shape.head_dim ||
      !kernels::cpu::AttentionTakes(shape)) {
    return ReferenceOps().attention(q, k, v, visibility);
  }
  const at::Tensor qc = q.contiguous();
  at::Tensor out = at::empty({shape.queries, shape.heads, shape.head_dim}, q.options());
  kernels::cpu::Attention(shape, qc.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(),
                          ranges.data(), out.data_ptr<float>());
  return out;
}

// Float32 rows, contiguous, against a float32 weight of the last dimension's size.
bool NormKernelsTake(const at::Tensor& x, const at::Tensor& weight) {
  return KernelsTake({&x, &weight}) && x.is_contiguous() && weight.is_contiguous() &&
         weight.dim() == 1 && x.dim() >= 1 && weight.size(0) == x.size(-1) && x.size(-1) > 0;
}

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps, NormWeight kind) {
  if (!NormKernelsTake(x, weight)) return ReferenceOps().rms_norm(x, weight, eps, kind);
  at::Tensor out = at::empty_like(x);
  kernels::cpu::RmsNorm(x.data_ptr<float>(), x.numel() / x.size(-1), x.size(-1),
                        weight.data_ptr<float>(), kind == NormWeight::kZeroCentred,
                        static_cast<float>(eps), out.data_ptr<float>());
  return out;
}

at::Tensor GatedRmsNorm(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& weight,
                        double eps) {
  if (!NormKernelsTake(x, weight) || !KernelsTake({&gate}) || !gate.is_contiguous() ||
      gate.sizes() != x.sizes()) {
    return ReferenceOps().gated_rms_norm(x, gate, weight, eps);
  }
  at::Tensor out = at::empty_like(x);
  kernels::cpu::GatedRmsNorm(x.data_ptr<float>(), gate.data_ptr<float>(), x.numel() / x.size(-1),
                             x.size(-1), weight.data_ptr<float>(), static_cast<float>(eps),
                             out.data_ptr<float>());
  return out;
}

at::Tensor SiluMul(const at::Tensor& gate, const at::Tensor& up) {
  if (!KernelsTake({&gate, &up}) || !gate.is_contiguous() || !up.is_contiguous() ||
      gate.sizes() != up.sizes()) {
    return ReferenceOps().silu_mul(gate, up);
  }
  at::Tensor out = at::empty_like(gate);
  kernels::cpu::SiluMul(gate.data_ptr<float>(), up.data_ptr<float>(), gate.numel(),
                        out.data_ptr<float>());
  return out;
}

// Rows of float32 entries in place (the logits a head wrote, or a view of some of their rows).
at::Tensor RowArgmax(const at::Tensor& x) {
  if (x.scalar_type() != at::kFloat || x.dim() != 2 || x.size(1) == 0 || x.stride(1) != 1) {
    return ReferenceOps().row_argmax(x);
  }
  at::Tensor out = at::empty({x.size(0)}, x.options().dtype(at::kLong));
  kernels::cpu::RowArgmax(x.data_ptr<float>(), x.size(0), x.size(1), x.stride(0),
                          out.data_ptr<int64_t>());
  return out;
}

// A row of float32 scores, or of probabilities.
bool KernelsTakeRow(const at::Tensor& row) {
  return KernelsTake({&row}) && row.dim() == 1 && row.size(0) > 0;
}

at::Tensor TruncatedSoftmax(const at::Tensor& scores, const Truncation& truncation) {
  if (!KernelsTakeRow(scores)) return ReferenceOps().truncated_softmax(scores, truncation);
  const at::Tensor row = scores.contiguous();
  at::Tensor out = at::empty_like(row);
  kernels::cpu::TruncatedSoftmax(row.data_ptr<float>(), row.size(0),
                                 {.temperature = truncation.temperature,
                                  .top_k = truncation.top_k,
                                  .top_p = truncation.top_p,
                                  .min_p = truncation.min_p},
                                 out.data_ptr<float>());
  return out;
}

int64_t InverseCdf(const at::Tensor& probabilities, double u) {
  if (!KernelsTakeRow(probabilities)) return ReferenceOps().inverse_cdf(probabilities, u);
  const at::Tensor row = probabilities.contiguous();
  return kernels::cpu::InverseCdf(row.data_ptr<float>(), row.size(0), u);
}

// A state the kernels can read and write in place: float32, contiguous, no gradient.
bool KernelsTakeState(const at::Tensor& state) {
  return KernelsTake({&state}) && state.is_contiguous();
}

// The delta-rule kernel runs the recurrence token by token, which is also the chunked form's
// function. So on a CPU a verify block, a prefill chunk, the replay after a rollback and a decode
// step make the same arithmetic per token. Returns nothing where it does not take the inputs.
std::optional<at::Tensor> DeltaRuleKernel(const at::Tensor& q, const at::Tensor& k,
                                          const at::Tensor& v, const at::Tensor& g,
                                          const at::Tensor& beta,
                                          std::span<const DeltaRuleSequence> sequences) {
  if (!KernelsTake({&q, &k, &v, &g, &beta})) return std::nullopt;
  std::vector<kernels::cpu::DeltaRuleSequence> states;
  std::vector<at::Tensor> initial_states;  // contiguous copies, where one was not
  for (const DeltaRuleSequence& sequence : sequences) {
    if (!KernelsTake({&sequence.initial_state}) || !KernelsTakeState(sequence.final_state)) {
      return std::nullopt;
    }
    initial_states.push_back(sequence.initial_state.contiguous());
    states.push_back({.tokens = sequence.length,
                      .stored_tokens = sequence.stored_length.value_or(sequence.length),
                      .initial_state = initial_states.back().data_ptr<float>(),
                      .final_state = sequence.final_state.data_ptr<float>()});
  }
  const kernels::cpu::DeltaRuleShape shape{
      .tokens = q.size(0), .heads = q.size(1), .key_dim = q.size(2), .value_dim = v.size(2)};
  const at::Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
  const at::Tensor gc = g.contiguous(), bc = beta.contiguous();
  at::Tensor out = at::empty({shape.tokens, shape.heads, shape.value_dim}, v.options());
  kernels::cpu::RecurrentGatedDeltaRule(shape, qc.data_ptr<float>(), kc.data_ptr<float>(),
                                        vc.data_ptr<float>(), gc.data_ptr<float>(),
                                        bc.data_ptr<float>(), states, out.data_ptr<float>());
  return out;
}

// One sequence's delta rule through the kernel.
std::optional<at::Tensor> SequenceDeltaRuleKernel(const at::Tensor& q, const at::Tensor& k,
                                                  const at::Tensor& v, const at::Tensor& g,
                                                  const at::Tensor& beta,
                                                  const at::Tensor& initial_state,
                                                  at::Tensor& final_state) {
  const DeltaRuleSequence sequence{
      .length = q.size(0), .initial_state = initial_state, .final_state = final_state};
  return DeltaRuleKernel(q, k, v, g, beta, {&sequence, 1});
}

at::Tensor BatchedDeltaRule(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& g, const at::Tensor& beta,
                            std::span<const DeltaRuleSequence> sequences) {
  if (std::optional<at::Tensor> out = DeltaRuleKernel(q, k, v, g, beta, sequences)) {
    return *std::move(out);
  }
  return ReferenceOps().batched_gated_delta_rule(q, k, v, g, beta, sequences);
}

DeltaRuleGates GatedDeltaNetGates(const at::Tensor& a, const at::Tensor& b, const at::Tensor& a_log,
                                  const at::Tensor& dt_bias) {
  if (!KernelsTake({&a, &b, &a_log, &dt_bias})) {
    return ReferenceOps().gated_delta_net_gates(a, b, a_log, dt_bias);
  }
  const at::Tensor ac = a.contiguous(), bc = b.contiguous();
  const at::Tensor lc = a_log.contiguous(), dc = dt_bias.contiguous();
  DeltaRuleGates gates{.g = at::empty_like(ac), .beta = at::empty_like(bc)};
  kernels::cpu::DeltaRuleGates(ac.data_ptr<float>(), bc.data_ptr<float>(), a.size(0), a.size(1),
                               lc.data_ptr<float>(), dc.data_ptr<float>(),
                               gates.g.data_ptr<float>(), gates.beta.data_ptr<float>());
  return gates;
}

// The conv kernel over float32 inputs, each sequence's state advanced and silu applied (the
// Gated DeltaNet's step) or neither; nothing where it does not take them.
std::optional<at::Tensor> ConvKernel(const at::Tensor& x, const at::Tensor& weight,
                                     std::span<const ConvSequence> sequences, bool step) {
  if (!KernelsTake({&x, &weight}) || !weight.is_contiguous()) return std::nullopt;
  std::vector<kernels::cpu::ConvSequence> states;
  for (const ConvSequence& sequence : sequences) {
    if (!KernelsTakeState(sequence.state)) return std::nullopt;
    float* state = sequence.state.data_ptr<float>();
    states.push_back(
        {.rows = sequence.length, .state = state, .next_state = step ? state : nullptr});
  }
  const at::Tensor input = x.contiguous();
  at::Tensor out = at::empty_like(input);
  kernels::cpu::CausalConv1d(input.data_ptr<float>(), x.size(1), weight.data_ptr<float>(),
                             weight.size(1), states, /*silu=*/step, out.data_ptr<float>());
  return out;
}

at::Tensor CausalConv1d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& state) {
  const ConvSequence sequence{.length = x.size(0), .state = state};
  if (std::optional<at::Tensor> out = ConvKernel(x, weight, {&sequence, 1}, /*step=*/false)) {
    return *std::move(out);
  }
  return ReferenceOps().causal_conv1d(x, weight, state);
}

at::Tensor CausalConv1dAdvance(const at::Tensor& x, const at::Tensor& weight,
                               std::span<const ConvSequence> sequences) {
  if (std::optional<at::Tensor> out = ConvKernel(x, weight, sequences, /*step=*/true)) {
    return *std::move(out);
  }
  return ReferenceOps().causal_conv1d_advance(x, weight, sequences);
}

}  // namespace kernels_cpu
}  // namespace

const Backend& CpuBackend() {
  static const Backend backend{
      .name = "cpu",
      .device = c10::DeviceType::CPU,
      .ops = {.project = &kernels_cpu::Project,
              .project_int4 = &kernels_cpu::ProjectInt4,
              .project_int8 = &kernels_cpu::ProjectInt8,
              .recurrent_gated_delta_rule =
                  &RecurrentGatedDeltaRuleOr<&kernels_cpu::SequenceDeltaRuleKernel>,
              .chunked_gated_delta_rule =
                  &ChunkedGatedDeltaRuleOr<&kernels_cpu::SequenceDeltaRuleKernel>,
              .batched_gated_delta_rule = &kernels_cpu::BatchedDeltaRule,
              .gated_delta_net_gates = &kernels_cpu::GatedDeltaNetGates,
              .attention = &kernels_cpu::Attention,
              .rms_norm = &kernels_cpu::RmsNorm,
              .gated_rms_norm = &kernels_cpu::GatedRmsNorm,
              .silu_mul = &kernels_cpu::SiluMul,
              .row_argmax = &kernels_cpu::RowArgmax,
              .truncated_softmax = &kernels_cpu::TruncatedSoftmax,
              .inverse_cdf = &kernels_cpu::InverseCdf,
              .causal_conv1d = &kernels_cpu::CausalConv1d,
              .causal_conv1d_advance = &kernels_cpu::CausalConv1dAdvance}};
  return backend;
}

bool ConfigureCpuThreads(int threads) {
  const int pool_size = threads > 0 ? threads : kernels::cpu::AvailableCpus();
  if (!kernels::cpu::ThreadPool::SetSharedSize(pool_size)) return false;
  at::set_num_threads(1);
  return true;
}

}  // namespace specd::model::ops
