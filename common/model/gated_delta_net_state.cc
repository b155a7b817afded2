#include "common/model/gated_delta_net_state.h"

#include <ATen/ATen.h>

#include <utility>

#include "common/model/ops/ops.h"

namespace specd::model {
namespace {

// The last K−1 rows of [state ‖ x]: the convolution's state after x has been seen.
at::Tensor ConvStateAfter(const at::Tensor& state, const at::Tensor& x) {
  const at::Tensor window = at::cat({state, x}, 0);
  return window.narrow(0, window.size(0) - state.size(0), state.size(0));
}

}  // namespace

DeltaRuleInputs DeltaRuleInputs::Rows(int64_t first, int64_t count) const {
  return {q.narrow(0, first, count), k.narrow(0, first, count), v.narrow(0, first, count),
          g.narrow(0, first, count), beta.narrow(0, first, count)};
}

DeltaRuleInputs DeltaRuleInputs::Clone() const {
  return {q.clone(), k.clone(), v.clone(), g.clone(), beta.clone()};
}

GatedDeltaNetState::GatedDeltaNetState(const GatedDeltaNetDims& dims, const ModelOptions& options) {
  const auto conv_options = at::TensorOptions().dtype(options.dtype).device(options.device);
  conv_ = at::zeros({dims.conv_kernel - 1, dims.conv_channels()}, conv_options);
  conv_before_block_ = at::zeros_like(conv_);
  recurrent_ =
      at::zeros({dims.value_heads, dims.key_dim, dims.value_dim}, conv_options.dtype(at::kFloat));
}

CacheFootprint GatedDeltaNetState::Footprint(const GatedDeltaNetDims& dims,
                                             const ModelOptions& options) {
  const auto element = static_cast<int64_t>(c10::elementSize(options.dtype));
  const int64_t conv = (dims.conv_kernel - 1) * dims.conv_channels() * element;
  const int64_t recurrent =
      dims.value_heads * dims.key_dim * dims.value_dim * static_cast<int64_t>(sizeof(float));
  // The conv window twice: the live one and the one before a pending block.
  return {.fixed_bytes = 2 * conv + recurrent, .bytes_per_token = 0};
}

int64_t GatedDeltaNetState::bytes() const {
  return static_cast<int64_t>(conv_.nbytes() + conv_before_block_.nbytes() + recurrent_.nbytes());
}

ops::ConvSequence GatedDeltaNetState::StartConv(int64_t tokens, bool keep_for_rollback) {
  if (keep_for_rollback) conv_before_block_.copy_(conv_);
  return {.length = tokens, .state = conv_};
}

GatedDeltaNetState::Recurrence GatedDeltaNetState::StartRecurrence(const at::Tensor& conv_inputs,
                                                                   const DeltaRuleInputs& inputs,
                                                                   bool keep_for_rollback) {
  ReplayPendingBlockWhole();
  const int64_t replayed = replay_.has_value() ? replay_->q.size(0) : 0;
  const int64_t tokens = replayed + inputs.q.size(0);
  Recurrence recurrence{
      .sequence =
          {.length = tokens,
           .initial_state = recurrent_,
           .final_state = recurrent_,
           // Decode takes the token-by-token form; anything longer (and every block, so
           // that a replay makes the arithmetic a shorter block would have) the chunked one.
           .chunked = tokens > 1 || keep_for_rollback,
           .stored_length = keep_for_rollback ? replayed : tokens},
      .replay = std::move(replay_)};
  replay_.reset();
  if (keep_for_rollback) block_ = Block{conv_inputs, inputs};
  return recurrence;
}

void GatedDeltaNetState::ReplayPendingBlockWhole() {
  if (!block_.has_value()) return;
  replay_ = std::move(block_->inputs);
  block_.reset();
}

void GatedDeltaNetState::RollbackBlock(int64_t accepted) {
  if (!block_.has_value()) return;
  const Block block = *std::move(block_);
  block_.reset();
  if (accepted < block.conv_inputs.size(0)) {
    conv_.copy_(ConvStateAfter(conv_before_block_, block.conv_inputs.narrow(0, 0, accepted)));
  }
  if (accepted > 0) replay_ = block.inputs.Rows(0, accepted).Clone();
}

int64_t GatedDeltaNetState::replay_length() const {
  if (block_.has_value()) return block_->inputs.q.size(0);
  return replay_.has_value() ? replay_->q.size(0) : 0;
}

void GatedDeltaNetState::ApplyReplay() {
  ReplayPendingBlockWhole();
  if (!replay_.has_value()) return;
  const ops::DeltaRuleSequence sequence{.length = replay_->q.size(0),
                                        .initial_state = recurrent_,
                                        .final_state = recurrent_,
                                        .chunked = true,
                                        .stored_length = replay_->q.size(0)};
  ops::GatedDeltaRule(replay_->q, replay_->k, replay_->v, replay_->g, replay_->beta,
                      {&sequence, 1});
  replay_.reset();
}

void GatedDeltaNetState::AppendBlock(std::vector<at::Tensor>& tensors) const {
  TORCH_CHECK(block_.has_value(), "no block to append");
  const DeltaRuleInputs& inputs = block_->inputs;
  tensors.insert(tensors.end(),
                 {block_->conv_inputs, inputs.q, inputs.k, inputs.v, inputs.g, inputs.beta});
}

void GatedDeltaNetState::KeepBlock(std::span<const at::Tensor> tensors) {
  TORCH_CHECK(tensors.size() == kBlockTensors, "a block is ", kBlockTensors, " tensors");
  block_ = Block{
      .conv_inputs = tensors[0],
      .inputs = {
          .q = tensors[1], .k = tensors[2], .v = tensors[3], .g = tensors[4], .beta = tensors[5]}};
}

void GatedDeltaNetState::Reset() {
  block_.reset();
  replay_.reset();
  conv_.zero_();
  recurrent_.zero_();
}

}  // namespace specd::model
