#pragma once
// The constant-size memory of one Gated DeltaNet layer for one sequence: the last K−1 inputs of
// its causal conv and the float32 recurrent state of every value head. Unlike a KV cache it
// cannot be truncated, so a verify block leaves the recurrent state as it was and keeps its
// inputs to the recurrence; rolling back keeps those of the accepted tokens, which the
// sequence's next forward replays before its own in the same pass over the state (the conv's
// small window is kept before the block and recomputed at once). See common/model/README.md for
// the costs.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

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
  // In memory of their own.
  DeltaRuleInputs Clone() const;
};

class GatedDeltaNetState {
 public:
  GatedDeltaNetState(const GatedDeltaNetDims& dims, const ModelOptions& options);

  // What such a state takes (all of it fixed: it does not grow with the sequence).
  static CacheFootprint Footprint(const GatedDeltaNetDims& dims, const ModelOptions& options);
  // What this one holds.
  int64_t bytes() const;

  // This state's part of the recurrence op, and the rows it replays before the forward's own:
  // the layer puts `replay`'s rows before this sequence's rows of the op's inputs.
  struct Recurrence {
    ops::DeltaRuleSequence sequence;
    std::optional<DeltaRuleInputs> replay;
  };

  // Feeding T tokens takes two ops, each of which the layer runs over its whole batch at once:
  // the conv over their `conv_inputs` [T, conv_channels], which become conv history, then the
  // recurrence over `inputs`. Each call returns this state's part of its op. With
  // `keep_for_rollback`, a later RollbackBlock can return to any prefix of these tokens.
  ops::ConvSequence StartConv(int64_t tokens, bool keep_for_rollback);
  Recurrence StartRecurrence(const at::Tensor& conv_inputs, const DeltaRuleInputs& inputs,
                             bool keep_for_rollback);

  // Keeps only the first `accepted` tokens of the last ones fed (which were kept for rollback).
  void RollbackBlock(int64_t accepted);

  // Tokens of an earlier block the next StartRecurrence puts before its own: the pending block
  // whole, or what RollbackBlock kept of it.
  int64_t replay_length() const;

  // A forward replayed as a CUDA graph (step_graphs.h) can neither replay a block nor keep one on
  // the host, so around it the model: runs the replay now, in a call of its own (the same
  // arithmetic per token as in the forward); has the graph return the block the forward kept
  // (AppendBlock: conv inputs, then q, k, v, g, beta); and keeps the copies of them each replay
  // gives back (KeepBlock).
  void ApplyReplay();
  void AppendBlock(std::vector<at::Tensor>& tensors) const;
  void KeepBlock(std::span<const at::Tensor> tensors);
  static constexpr size_t kBlockTensors = 6;

  void Reset();

 private:
  struct Block {
    at::Tensor conv_inputs;
    DeltaRuleInputs inputs;
  };

  // A pending block that was not rolled back was accepted whole: all of it is to be replayed.
  void ReplayPendingBlockWhole();

  at::Tensor conv_;
  at::Tensor conv_before_block_;
  // The state after every token fed but those of `replay_`.
  at::Tensor recurrent_;
  // The pending block, until it is rolled back or the next forward takes it whole.
  std::optional<Block> block_;
  // Accepted tokens the recurrent state is not yet after (copies: the batch's inputs they came
  // from are freed).
  std::optional<DeltaRuleInputs> replay_;
};

}  // namespace specd::model
