#pragma once
// The rows of a batched forward: many sequences' tokens side by side, each sequence's rows
// consecutive. Row-wise work (projections, norms, MLPs) runs over the whole batch at once, and so
// do the DeltaNet's conv and recurrence (ops taking each sequence's rows and state); attention
// over a sequence's cache runs per sequence.
#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <span>
#include <vector>

#include "common/model/rope.h"

namespace specd::model {

// One sequence's rows in a batched forward: rows [row, row + length) of the batch, at positions
// [start, start + length) of that sequence.
struct SequenceRows {
  int64_t row = 0;
  int64_t length = 0;
  int64_t start = 0;
  bool keep_for_rollback = false;  // a verify block
};

// What every layer of one forward call shares.
struct ForwardContext {
  std::vector<SequenceRows> sequences;  // in row order, covering every row
  RotaryAngles angles;                  // every row's, at its own position
  // Every row's position as a [rows] int64 tensor on the model's device, in a forward run in the
  // form a CUDA graph replays at later positions (common/model/step_graphs.h): the caches are
  // written at these and attention runs over a whole cache under a mask, so that no shape or
  // offset depends on `start`. Undefined otherwise.
  at::Tensor positions;

  // Adds a sequence's `length` rows after the others, at positions [start, start + length).
  void Add(int64_t length, int64_t start, bool keep_for_rollback = false) {
    sequences.push_back(
        {.row = rows(), .length = length, .start = start, .keep_for_rollback = keep_for_rollback});
  }
  int64_t rows() const {
    return sequences.empty() ? 0 : sequences.back().row + sequences.back().length;
  }
  // Every row's position in its sequence, in row order: what `angles` are taken at.
  std::vector<int64_t> Positions() const {
    std::vector<int64_t> positions;
    positions.reserve(rows());
    for (const SequenceRows& sequence : sequences) {
      for (int64_t t = 0; t < sequence.length; ++t) positions.push_back(sequence.start + t);
    }
    return positions;
  }

  // The inputs of a forward replayed as a CUDA graph (step_graphs.h): the caller's `first` (the
  // tokens, or a drafter's block embeddings), then what changes with this context from step to
  // step — every row's position, on `device`, and its rotary angles.
  std::vector<at::Tensor> GraphInputs(const at::Tensor& first, c10::Device device) const;
  // This context in the form a graph replays, its positions and angles read from a step's inputs
  // (GraphInputs' order).
  ForwardContext Replaying(std::span<const at::Tensor> inputs) const;
};

// `part(i, rows)` of every sequence i, stacked back in batch order along dim 0.
template <typename Part>
at::Tensor PerSequence(const ForwardContext& context, const Part& part) {
  if (context.sequences.size() == 1) return part(0, context.sequences.front());
  std::vector<at::Tensor> parts;
  parts.reserve(context.sequences.size());
  for (size_t i = 0; i < context.sequences.size(); ++i) {
    parts.push_back(part(i, context.sequences[i]));
  }
  return at::cat(parts, 0);
}

}  // namespace specd::model
