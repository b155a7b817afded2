#pragma once
// The gated delta rule, the recurrence at the heart of Gated DeltaNet, per value head:
//   S_t = exp(g_t) · (I − β_t k_t k_tᵀ) · S_{t−1} + β_t k_t v_tᵀ,    o_t = S_tᵀ q_t
// with S [key_dim, value_dim] in float32. Two forms compute the same function: a token-by-token
// one for decode, and a chunked one (WY representation, chunk 64) that turns a prefill or a
// verify block into matrix products. These are the ops a CPU or CUDA kernel replaces.
//
// Shapes: q, k [T, heads, key_dim] (q l2-normalised and scaled by key_dim^-1/2, k l2-normalised),
// v [T, heads, value_dim], g (log decay, ≤ 0) and beta [T, heads]; all float32. States are
// [heads, key_dim, value_dim] float32. Both return the output [T, heads, value_dim] float32 and
// write the state after the last token into `final_state`, which may be `initial_state` itself.
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace specd::model {

inline constexpr int64_t kDeltaRuleChunkSize = 64;

// The token-by-token form, by the kernel registry's choice for q's device.
at::Tensor RecurrentGatedDeltaRule(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const at::Tensor& g, const at::Tensor& beta,
                                   const at::Tensor& initial_state, at::Tensor& final_state);
// The token-by-token form as LibTorch ops.
at::Tensor RecurrentGatedDeltaRuleComposition(const at::Tensor& q, const at::Tensor& k,
                                              const at::Tensor& v, const at::Tensor& g,
                                              const at::Tensor& beta,
                                              const at::Tensor& initial_state,
                                              at::Tensor& final_state);

at::Tensor ChunkedGatedDeltaRule(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& g, const at::Tensor& beta,
                                 const at::Tensor& initial_state, at::Tensor& final_state,
                                 int64_t chunk_size = kDeltaRuleChunkSize);

}  // namespace specd::model
