#pragma once
// The Gated DeltaNet's depthwise causal convolution over several sequences' rows in one call (a
// batch of decode steps, verify blocks and prefill chunks), each continuing its own history:
//   out_t[c] = Σ_j w[c, j] · in_{t−K+1+j}[c],  in_{−K+1} … in_{−1} = the sequence's state.
// Channels are independent, so the pool splits runs of channels, each over every sequence (its
// taps transposed once), and each state can advance in the same pass (to the last K−1 rows of
// [state ‖ x]). With `silu`, out is silu of the sum (the Gated DeltaNet's activation, in the same
// pass).
//
// Row-major float32: x and out [rows, channels], a sequence's rows back to back after the
// previous one's; weight [channels, kernel]; a state [kernel − 1, channels], oldest row first.
#include <cstdint>
#include <span>

#include "kernels/cpu/thread_pool.h"

namespace specd::kernels::cpu {

struct ConvSequence {
  int64_t rows = 0;
  const float* state = nullptr;  // the inputs before the sequence's first row
  float* next_state = nullptr;   // gets the state after its last row; may be `state`, or null
};

void CausalConv1d(const float* x, int64_t channels, const float* weight, int64_t kernel,
                  std::span<const ConvSequence> sequences, bool silu, float* out,
                  ThreadPool& pool = ThreadPool::Shared());

}  // namespace specd::kernels::cpu
