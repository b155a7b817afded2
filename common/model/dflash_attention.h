#pragma once
// The attention of a DFlash drafter layer (z-lab DFlashDraftModel, research/dflash.md §2.4): a
// Qwen3 GQA attention whose queries are only the draft block, and whose keys and values are the
// injected context (the projected target features, kept in a KvCache) followed by the block's
// own. Context and block keys alike take k_norm and RoPE at their absolute positions; the block
// attends to all of it non-causally.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <span>
#include <string>

#include "common/io/dflash_config.h"
#include "common/model/forward_context.h"
#include "common/model/kv_cache.h"
#include "common/model/linear.h"
#include "common/model/ops/ops.h"
#include "common/model/plain_rms_norm.h"
#include "common/model/rope.h"
#include "common/model/weight_reader.h"

namespace specd::model {

class DFlashAttention {
 public:
  // Reads `<prefix>{q,k,v,o}_proj` and `<prefix>{q,k}_norm.weight`.
  static DFlashAttention Load(WeightReader& reader, const io::DFlashDraftConfig& config,
                              const std::string& prefix);

  KvCache NewCache(int64_t max_length, const ModelOptions& options) const;
  CacheFootprint SequenceFootprint(const ModelOptions& options) const;

  // Writes the keys and values of context features [rows, hidden]: sequence i's rows
  // (`sequences.sequences[i]`, at their positions) into caches[i].
  void AppendContext(const at::Tensor& context, std::span<KvCache* const> caches,
                     const ForwardContext& sequences) const;

  // x [rows, hidden]: sequence i's block at positions [start, start + B) (`blocks.sequences[i]`),
  // attending to the first `start` positions of caches[i] and to its whole block. windows[i] as
  // DraftOptions::window says (0: no window). With blocks.positions (the form a CUDA graph
  // replays, forward_context.h), over the whole of each cache under a mask.
  at::Tensor Forward(const at::Tensor& x, std::span<const KvCache* const> caches,
                     const ForwardContext& blocks, std::span<const int64_t> windows) const;

  // Training: x [L, hidden] holds many blocks at once (`angles` their positions), attending to
  // every position of `context` [S, hidden] (`context_angles`) and to the block rows, as
  // `visible` [L, S + L] (bool) allows.
  at::Tensor ForwardMasked(const at::Tensor& x, const RotaryAngles& angles,
                           const at::Tensor& context, const RotaryAngles& context_angles,
                           const at::Tensor& visible) const;

 private:
  // One block's attention in the replayable form: `queries` [B, heads, d] and the block's `keys`,
  // `values` [B, kv_heads, d] at `positions` [B] (on the device), after every position `cache`
  // can hold, of which those before the block's first are its context.
  static at::Tensor ReplayableForward(const at::Tensor& queries, const at::Tensor& keys,
                                      const at::Tensor& values, const at::Tensor& positions,
                                      const KvCache& cache, int64_t window);
  at::Tensor Keys(const at::Tensor& x, const RotaryAngles& angles) const;  // [T, kv_heads, d]
  at::Tensor Values(const at::Tensor& x) const;
  at::Tensor Queries(const at::Tensor& x, const RotaryAngles& angles) const;  // [T, heads, d]

  int64_t heads_ = 0;
  int64_t kv_heads_ = 0;
  int64_t head_dim_ = 0;
  Linear q_proj_;
  Linear k_proj_;
  Linear v_proj_;
  Linear o_proj_;
  PlainRmsNorm q_norm_;
  PlainRmsNorm k_norm_;
};

}  // namespace specd::model
