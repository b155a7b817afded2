#pragma once
// The Gated DeltaNet's gates per token and value head, from the layer's projections a and b:
//   g    = −exp(a_log) · softplus(a + dt_bias)   (the log decay, ≤ 0)
//   beta = sigmoid(b)                              (the write strength)
// Each element on its own, scalar: a token's gates are the same whatever tokens share the call,
// where LibTorch's vectorised loops round an element one way in a vector and another in the
// scalar tail, which is placed by the call's size. So a verify block's tokens get their decode
// steps' gates bit for bit.
//
// a, b, g and beta [rows, heads] row-major; a_log and dt_bias [heads].
#include <cstdint>

namespace specd::kernels::cpu {

void DeltaRuleGates(const float* a, const float* b, int64_t rows, int64_t heads, const float* a_log,
                    const float* dt_bias, float* g, float* beta);

}  // namespace specd::kernels::cpu
