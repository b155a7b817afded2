#pragma once
// The constant-size memory of one Gated DeltaNet layer for one sequence: the last K−1 inputs of
// its causal conv and the float32 recurrent state of every value head. Unlike a KV cache it
// cannot be truncated, so a verify block keeps what it needs to return to any prefix of itself:
// the state before the block (in a second, preallocated buffer; the block writes into the other
// one, so this costs no copy) and the block's inputs to the recurrence. Rolling back replays the
// recurrence alone over the accepted tokens; see common/model/README.md for the costs.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

#include "common/model/cache_footprint.h"
#include "common/model/model_options.h"
#include "common/model/ops/ops.h"

namespace specd::model {

struct GatedDeltaNetDims {
  int64_t key_heads = 0;
  int64_t value_heads = 0;  // a multiple of key_heads
  int64_t key_dim = 0;      // per head
  int64_t value_dim = 0;
  int64_t conv_kernel = 0;

  int64_t conv_channels() const { return 2 * key_heads * key_dim + value_heads * value_dim; }
};

// What the gated delta rule reads, in the layout ops::RecurrentGatedDeltaRule describes
// (ops/ops.h).
struct DeltaRuleInputs {
  at::Tensor q, k, v, g, beta;

  // Tokens [first, first + count).
  DeltaRuleInputs Rows(int64_t first, int64_t count) const;
};

class GatedDeltaNetState {
 public:
  GatedDeltaNetState(const GatedDeltaNetDims& dims, const ModelOptions& options);

  // What such a state takes (all of it fixed: it does not grow with the sequence).
  static CacheFootprint Footprint(const GatedDeltaNetDims& dims, const ModelOptions& options);
  // What this one holds.
  int64_t bytes() const;

  // Previous conv inputs [K−1, conv_channels], oldest first.
  const at::Tensor& conv() const { return conv_; }
  // [value_heads, key_dim, value_dim] float32.
  const at::Tensor& recurrent() const { return recurrent_; }

  // Feeding T tokens takes two ops, each of which the layer runs over its whole batch at once:
  // the conv over their `conv_inputs` [T, conv_channels], which become conv history, then the
  // recurrence over `inputs`. Each call returns this state's part of its op. With
  // `keep_for_rollback`, a later RollbackBlock can return to any prefix of these tokens.
  ops::ConvSequence StartConv(int64_t tokens, bool keep_for_rollback);
  ops::DeltaRuleSequence StartRecurrence(const at::Tensor& conv_inputs,
                                         const DeltaRuleInputs& inputs, bool keep_for_rollback);

  // Keeps only the first `accepted` tokens of the last ones fed (which were kept for rollback).
  void RollbackBlock(int64_t accepted);

  void Reset();

 private:
  struct Block {
    at::Tensor conv_inputs;
    DeltaRuleInputs inputs;
  };

  at::Tensor conv_;
  at::Tensor recurrent_;
  // The state before the pending block.
  at::Tensor block_start_conv_;
  at::Tensor block_start_recurrent_;
  std::optional<Block> block_;
};

}  // namespace specd::model
