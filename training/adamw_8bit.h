#pragma once
// AdamW (Loshchilov & Hutter; torch.optim.AdamW's update) whose moments live block-wise
// quantized to 8 bits, as bitsandbytes' 8-bit optimizers (Dettmers et al. 2021, "8-bit Optimizers
// via Block-wise Quantization"): each block of `block_size` elements keeps one float32 absmax
// scale, so an outlier only coarsens its own block. Every step dequantizes, updates in float32
// and requantizes. Memory: 2 bytes per parameter element plus 8 bytes per block.
//
// bitsandbytes maps each block onto its non-linear "dynamic" 8-bit type (a floating exponent,
// signed for m, unsigned for v) so that small values keep precision beside the block's largest.
// We get most of that with square-root companding, simpler to reason about: each moment stores
// sign(x) · sqrt(|x|) on a linear grid of its block's absmax (int8, 127 levels for m; uint8, 255
// levels for v ≥ 0). Values down to ~1e-5 of the block's absmax stay non-zero, where a linear m
// grid rounds every |m| < absmax / 254 to 0 and freezes those elements (on the unit test's least
// squares at a lower lr, linear m ended 11% above 32-bit AdamW's loss, square-root m 1.5%). For
// v the root is also what the update divides by. A positive v never rounds to 0 (it takes the
// smallest code): dividing by eps alone would blow the update up, while overestimating a tiny
// denominator only shrinks that element's step.
#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace specd::train {

struct AdamW8bitOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // decoupled: p ← p · (1 − lr · weight_decay), torch's default
  int64_t block_size = 256;
};

// A flat tensor's 8-bit codes and one float32 scale per block.
struct BlockQuantized {
  at::Tensor codes;   // int8 (first moment) or uint8 (second), numel of the input
  at::Tensor scales;  // float32 [ceil(numel / block_size)]: the blocks' absmax of sqrt(|x|)
};

BlockQuantized QuantizeFirstMoment(const at::Tensor& m, int64_t block_size);
at::Tensor DequantizeFirstMoment(const BlockQuantized& q, int64_t block_size);
BlockQuantized QuantizeSecondMoment(const at::Tensor& v, int64_t block_size);
at::Tensor DequantizeSecondMoment(const BlockQuantized& q, int64_t block_size);

class AdamW8bit {
 public:
  // `params`: float32 CPU tensors whose .grad() the caller fills; they are updated in place.
  static absl::StatusOr<AdamW8bit> Create(std::vector<at::Tensor> params,
                                          const AdamW8bitOptions& options = {});

  // One update of every parameter that has a gradient.
  void Step(double lr);
  void ZeroGrad();

  // The moments and step count (not the parameters), for resumable checkpoints; LoadState takes
  // what State returned for the same parameter shapes and block size.
  std::vector<std::byte> State() const;
  absl::Status LoadState(const std::vector<std::byte>& state);

  int64_t steps() const { return steps_; }

 private:
  struct Moments {
    BlockQuantized m;
    BlockQuantized v;
  };

  AdamW8bit(std::vector<at::Tensor> params, const AdamW8bitOptions& options);

  std::vector<at::Tensor> params_;
  std::vector<Moments> moments_;  // one per parameter
  AdamW8bitOptions options_;
  int64_t steps_ = 0;
};

}  // namespace specd::train
