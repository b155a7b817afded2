#pragma once
// The op table: every op of ops.h as a function pointer, one table per backend. The reference
// (reference.cc: LibTorch compositions, any device, the ground truth) fills every entry; a backend
// (cpu_backend.cc, and cuda_backend.cc beside it when CUDA is built) fills the entries its kernels
// implement, for one device type, and hands inputs its kernels do not take (another dtype, a
// gradient to record) back to the reference. A backend is one more file and one more line in
// op_table.cc.
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>

#include "common/model/ops/ops.h"

namespace specd::model::ops {

struct OpTable {
  at::Tensor (*project)(const at::Tensor& x, const at::Tensor& weight) = nullptr;
  at::Tensor (*project_int4)(const at::Tensor& x, const quant::Int4KernelWeight& weight) = nullptr;
  at::Tensor (*project_int4_tensors)(const at::Tensor& x, const Int4Tensors& weight) = nullptr;
  at::Tensor (*project_int8)(const at::Tensor& x, const kernels::cpu::VnniMatrix& weight) = nullptr;
  at::Tensor (*recurrent_gated_delta_rule)(const at::Tensor& q, const at::Tensor& k,
                                           const at::Tensor& v, const at::Tensor& g,
                                           const at::Tensor& beta, const at::Tensor& initial_state,
                                           at::Tensor& final_state) = nullptr;
  at::Tensor (*chunked_gated_delta_rule)(const at::Tensor& q, const at::Tensor& k,
                                         const at::Tensor& v, const at::Tensor& g,
                                         const at::Tensor& beta, const at::Tensor& initial_state,
                                         at::Tensor& final_state, int64_t chunk_size) = nullptr;
  at::Tensor (*batched_gated_delta_rule)(const at::Tensor& q, const at::Tensor& k,
                                         const at::Tensor& v, const at::Tensor& g,
                                         const at::Tensor& beta,
                                         std::span<const DeltaRuleSequence> sequences) = nullptr;
  DeltaRuleGates (*gated_delta_net_gates)(const at::Tensor& a, const at::Tensor& b,
                                          const at::Tensor& a_log,
                                          const at::Tensor& dt_bias) = nullptr;
  at::Tensor (*attention)(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const Visibility& visibility) = nullptr;
  at::Tensor (*rms_norm)(const at::Tensor& x, const at::Tensor& weight, double eps,
                         NormWeight kind) = nullptr;
  at::Tensor (*gated_rms_norm)(const at::Tensor& x, const at::Tensor& gate,
                               const at::Tensor& weight, double eps) = nullptr;
  at::Tensor (*silu_mul)(const at::Tensor& gate, const at::Tensor& up) = nullptr;
  at::Tensor (*row_argmax)(const at::Tensor& x) = nullptr;
  at::Tensor (*truncated_softmax)(const at::Tensor& scores, const Truncation& truncation) = nullptr;
  int64_t (*inverse_cdf)(const at::Tensor& probabilities, double u) = nullptr;
  at::Tensor (*rotary)(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) = nullptr;
  at::Tensor (*causal_conv1d)(const at::Tensor& x, const at::Tensor& weight,
                              const at::Tensor& state) = nullptr;
  at::Tensor (*causal_conv1d_advance)(const at::Tensor& x, const at::Tensor& weight,
                                      std::span<const ConvSequence> sequences) = nullptr;
};

struct Backend {
  std::string_view name;
  c10::DeviceType device;
  OpTable ops;  // null entries: the reference's
};

// Every op as LibTorch compositions.
const OpTable& ReferenceOps();

// The delta rule's two entries for a backend whose kernel runs the recurrence at every length (the
// chunked form's function too, and the same arithmetic per token as a decode step): each runs
// `kernel`, which returns nothing for inputs it does not take, or else the reference's own form.
using DeltaRuleKernelFunction = std::optional<at::Tensor> (*)(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
    const at::Tensor& beta, const at::Tensor& initial_state, at::Tensor& final_state);
template <DeltaRuleKernelFunction kernel>
at::Tensor RecurrentGatedDeltaRuleOr(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     const at::Tensor& g, const at::Tensor& beta,
                                     const at::Tensor& initial_state, at::Tensor& final_state) {
  if (std::optional<at::Tensor> out = kernel(q, k, v, g, beta, initial_state, final_state)) {
    return *std::move(out);
  }
  return ReferenceOps().recurrent_gated_delta_rule(q, k, v, g, beta, initial_state, final_state);
}
template <DeltaRuleKernelFunction kernel>
at::Tensor ChunkedGatedDeltaRuleOr(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const at::Tensor& g, const at::Tensor& beta,
                                   const at::Tensor& initial_state, at::Tensor& final_state,
                                   int64_t chunk_size) {
  if (std::optional<at::Tensor> out = kernel(q, k, v, g, beta, initial_state, final_state)) {
    return *std::move(out);
  }
  return ReferenceOps().chunked_gated_delta_rule(q, k, v, g, beta, initial_state, final_state,
                                                 chunk_size);
}
// The backends this build has, e.g. {cpu} or {cpu, cuda}.
std::span<const Backend> Backends();
// What runs on `device`: its backend's entries, the reference's where it has none or there is no
// backend for the device.
const OpTable& OpsFor(c10::DeviceType device);
// true: every device runs the reference (to measure what the kernels gain); false: the backends
// again. Only while no model runs.
void UseReferenceOnly(bool reference_only);

}  // namespace specd::model::ops
