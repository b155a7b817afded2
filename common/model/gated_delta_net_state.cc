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

GatedDeltaNetState::GatedDeltaNetState(const GatedDeltaNetDims& dims, const ModelOptions& options) {
  const auto conv_options = at::TensorOptions().dtype(options.dtype).device(options.device);
  const auto state_options = conv_options.dtype(at::kFloat);
  conv_ = at::zeros({dims.conv_kernel - 1, dims.conv_channels()}, conv_options);
  block_start_conv_ = at::zeros_like(conv_);
  recurrent_ = at::zeros({dims.value_heads, dims.key_dim, dims.value_dim}, state_options);
  block_start_recurrent_ = at::zeros_like(recurrent_);
}

CacheFootprint GatedDeltaNetState::Footprint(const GatedDeltaNetDims& dims,
                                             const ModelOptions& options) {
  const auto element = static_cast<int64_t>(c10::elementSize(options.dtype));
  const int64_t conv = (dims.conv_kernel - 1) * dims.conv_channels() * element;
  const int64_t recurrent =
      dims.value_heads * dims.key_dim * dims.value_dim * static_cast<int64_t>(sizeof(float));
  // Each twice: the live state and the state before a pending block.
  return {.fixed_bytes = 2 * (conv + recurrent), .bytes_per_token = 0};
}

int64_t GatedDeltaNetState::bytes() const {
  return static_cast<int64_t>(conv_.nbytes() + block_start_conv_.nbytes() + recurrent_.nbytes() +
                              block_start_recurrent_.nbytes());
}

ops::ConvSequence GatedDeltaNetState::StartConv(int64_t tokens, bool keep_for_rollback) {
  block_.reset();
  if (keep_for_rollback) block_start_conv_.copy_(conv_);
  return {.length = tokens, .state = conv_};
}

ops::DeltaRuleSequence GatedDeltaNetState::StartRecurrence(const at::Tensor& conv_inputs,
                                                           const DeltaRuleInputs& inputs,
                                                           bool keep_for_rollback) {
  if (keep_for_rollback) {
    std::swap(block_start_recurrent_, recurrent_);  // the block writes into the other buffer
    block_ = Block{conv_inputs, inputs};
  }
  const int64_t tokens = inputs.q.size(0);
  // Decode takes the token-by-token form; anything longer (and every block, so that a rollback
  // replays exactly the arithmetic a shorter block would have done) the chunked one.
  return {.length = tokens,
          .initial_state = keep_for_rollback ? block_start_recurrent_ : recurrent_,
          .final_state = recurrent_,
          .chunked = tokens > 1 || keep_for_rollback};
}

void GatedDeltaNetState::RollbackBlock(int64_t accepted) {
  if (!block_.has_value()) return;
  const Block block = *std::move(block_);
  block_.reset();
  if (accepted == block.conv_inputs.size(0)) return;
  conv_.copy_(ConvStateAfter(block_start_conv_, block.conv_inputs.narrow(0, 0, accepted)));
  if (accepted == 0) {
    recurrent_.copy_(block_start_recurrent_);
    return;
  }
  const auto& [q, k, v, g, beta] = block.inputs.Rows(0, accepted);
  ops::ChunkedGatedDeltaRule(q, k, v, g, beta, block_start_recurrent_, recurrent_);
}

void GatedDeltaNetState::Reset() {
  block_.reset();
  conv_.zero_();
  recurrent_.zero_();
}

}  // namespace specd::model
