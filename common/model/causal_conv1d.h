#pragma once
// Depthwise causal convolution over time with a rolling state: out_t[c] = Σ_j w[c, j] ·
// x_{t−K+1+j}[c], where the inputs before the current call come from `state`, the last K−1 inputs
// seen.
#include <ATen/core/Tensor.h>

namespace specd::model {

// x [T, C]; weight [C, K]; state [K−1, C] holds the previous inputs, oldest first. Returns
// [T, C] and does not touch `state` (callers decide when the inputs become history).
at::Tensor CausalConv1d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& state);

// The last K−1 rows of [state ‖ x]: the state after x has been seen.
at::Tensor ConvStateAfter(const at::Tensor& state, const at::Tensor& x);

}  // namespace specd::model
