#include "common/model/gated_delta_rule.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "common/model/kernel_registry.h"

namespace specd::model {

at::Tensor RecurrentGatedDeltaRule(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const at::Tensor& g, const at::Tensor& beta,
                                   const at::Tensor& initial_state, at::Tensor& final_state) {
  return KernelRegistry::Get().recurrent_gated_delta_rule.For(q.device().type())(
      q, k, v, g, beta, initial_state, final_state);
}

at::Tensor RecurrentGatedDeltaRuleComposition(const at::Tensor& q, const at::Tensor& k,
                                              const at::Tensor& v, const at::Tensor& g,
                                              const at::Tensor& beta,
                                              const at::Tensor& initial_state,
                                              at::Tensor& final_state) {
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

namespace {

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

}  // namespace

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
    ChunkResult chunk = ChunkStep(qh.narrow(1, start, c), kh.narrow(1, start, c),
                                  vh.narrow(1, start, c), gh.narrow(1, start, c),
                                  bh.narrow(1, start, c), state);
    outputs.push_back(std::move(chunk.out));
    state = std::move(chunk.next_state);
  }
  final_state.copy_(state);
  return at::cat(outputs, 1).transpose(0, 1);  // [T, H, Dv]
}

}  // namespace specd::model
