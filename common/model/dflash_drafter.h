#pragma once
// The DFlash block-diffusion drafter (z-lab DFlashDraftModel, research/dflash.md §2–§3): Qwen3
// decoder layers that draft a whole block in one forward. The target's tapped hidden states enter
// only as extra keys and values of every layer (KV injection), projected once per position into
// a DFlashCache; a block [anchor, MASK × (B − 1)] then attends non-causally to that context and
// to itself. The drafter has no embedding or head: the engine embeds the block and turns the
// draft hidden states into proposals with the target's (Qwen35Model::Embed, Head).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/io/dflash_config.h"
#include "common/io/qwen35_config.h"
#include "common/model/cache_footprint.h"
#include "common/model/dflash_attention.h"
#include "common/model/dflash_cache.h"
#include "common/model/linear.h"
#include "common/model/mlp.h"
#include "common/model/model_options.h"
#include "common/model/named_parameter.h"
#include "common/model/plain_rms_norm.h"
#include "common/model/rope.h"

namespace specd::model {

class StepGraphs;

struct DraftOptions {
  // A symmetric sliding window of W > 0 tokens: the block query at position q attends only to
  // keys at positions p with |p − q| < W, i.e. W − 1 on either side (z-lab dflash's
  // sliding-window mask; flash-attention window (W − 1, W − 1) in Nota's vLLM plugin). Nothing is
  // masked while context and block together fit in W positions. It bounds the attention only:
  // the cache keeps every position. 0: no window.
  int64_t window = 0;
};

// One sequence's part of DFlashDrafter::AppendContexts.
struct ContextInput {
  at::Tensor target_hidden;  // [n, taps · hidden]
  DFlashCache* cache = nullptr;
};

// One sequence's part of DFlashDrafter::DraftBlocks.
struct BlockInput {
  at::Tensor embeddings;  // [B, hidden]
  const DFlashCache* cache = nullptr;
  DraftOptions options = {};
};

class DFlashDrafter {
 public:
  // Reads `dir`/config.json and the safetensors beside it; the Linears that the drafter's own
  // compressed-tensors quantization_config names (if any) are W4A16.
  static absl::StatusOr<DFlashDrafter> Load(const std::filesystem::path& dir,
                                            const ModelOptions& options = {});

  const io::DFlashDraftConfig& config() const { return config_; }
  // The target ids a pruned head proposes from (config().draft_vocab_size of them, ascending,
  // from the checkpoint's `d2t`); undefined: the whole vocabulary.
  const at::Tensor& draft_vocab() const { return draft_vocab_; }
  const ModelOptions& options() const { return options_; }
  // The weights, when loaded with ModelOptions::trainable.
  const std::vector<NamedParameter>& parameters() const { return parameters_; }

  // OK when `target` is a model this drafter can draft for: the same hidden size, the number of
  // layers the drafter was made for (num_target_layers) and the mask token in its vocabulary.
  absl::Status CheckTarget(const io::Qwen35TextConfig& target) const;

  // The target's transformers hidden_states indices of the tapped layers (target_layer_ids + 1),
  // for ForwardOptions::hidden_states; concatenated in this order along the last dimension they
  // are the context features AppendContext takes.
  std::vector<int64_t> TargetHiddenStates() const;

  // A cache for up to `max_length` context positions.
  absl::StatusOr<DFlashCache> NewCache(int64_t max_length) const;
  // What NewCache allocates.
  CacheFootprint SequenceFootprint() const;

  // Appends the context features [n, taps · hidden] of the target positions [cache.length(),
  // cache.length() + n): fc and hidden_norm, then every layer's keys and values of them.
  absl::Status AppendContext(const at::Tensor& target_hidden, DFlashCache& cache) const;

  // AppendContext of every input in one forward (fc, norm and projections over all their rows);
  // the caches must be distinct. Checks every input before changing any cache.
  absl::Status AppendContexts(std::span<const ContextInput> batch) const;

  // The draft hidden states [B, hidden] (after the final norm) of the block whose input
  // embeddings are `block_embeddings` [B, hidden], at positions [cache.length(),
  // cache.length() + B). The block's own keys and values are not kept. Rows 1… through the
  // target's head are the B − 1 proposals.
  absl::StatusOr<at::Tensor> DraftBlock(const at::Tensor& block_embeddings,
                                        const DFlashCache& cache,
                                        const DraftOptions& options = {}) const;

  // DraftBlock of every input in one forward: their draft hidden states stacked [ΣB, hidden],
  // block i's rows after those of the blocks before it.
  absl::StatusOr<at::Tensor> DraftBlocks(std::span<const BlockInput> batch) const;

  // Training (research/dflash.md §4.1): the draft hidden states [N·B, hidden] of N blocks of B
  // in one forward, differentiable. Block j is rows [jB, (j + 1)B) of `block_embeddings`, at
  // positions anchors[j] + [0, B); it attends to itself non-causally and to the context
  // features `target_hidden` [S, taps · hidden] of positions strictly before anchors[j] (int64
  // [N], each in [1, S]), never to another block. What each block sees is what DraftBlock sees
  // after AppendContext of the first anchors[j] positions.
  absl::StatusOr<at::Tensor> DraftAnchoredBlocks(const at::Tensor& target_hidden,
                                                 const at::Tensor& block_embeddings,
                                                 const at::Tensor& anchors) const;

 private:
  struct Layer {
    PlainRmsNorm input_layernorm;
    DFlashAttention self_attn;
    PlainRmsNorm post_attention_layernorm;
    SwiGluMlp mlp;
  };

  DFlashDrafter() = default;

  absl::Status CheckCache(const DFlashCache& cache) const;
  // The layers and final norm over blocks `h` [rows, hidden] (DraftBlocks' device work).
  at::Tensor RunBlocks(std::span<const BlockInput> batch, const ForwardContext& blocks,
                       std::span<const int64_t> windows, at::Tensor h) const;

  io::DFlashDraftConfig config_;
  ModelOptions options_;
  Linear fc_;  // [hidden, taps · hidden]
  PlainRmsNorm hidden_norm_;
  std::vector<Layer> layers_;
  PlainRmsNorm norm_;
  RotaryEmbedding rotary_;
  // With ModelOptions::cuda_graphs; shared by the drafter's copies.
  std::shared_ptr<StepGraphs> step_graphs_;
  std::vector<NamedParameter> parameters_;
  at::Tensor draft_vocab_;
};

}  // namespace specd::model
