#pragma once
// Lossless speculative decoding (research/dflash.md §3): after the prompt, each step drafts a
// block [anchor, d1 … d_{B−1}], verifies it with ONE target forward on the warm cache, emits the
// longest prefix of drafts that equals the target's own choice plus the target's next token, and
// rolls the target cache back to what it emitted.
//
// The target chooses every token exactly as TargetDecoder does: the same sampler, fed the same
// logits row, in the same order, one draw per emitted token; a draft is accepted while it equals
// that choice ("sample and match"). So greedy output is TargetDecoder's token for token, and a
// sampled output is the target's distribution; with the same seed it is TargetDecoder's very
// sequence, up to the float rounding between a block forward and single-token decodes.
#include <optional>

#include "absl/status/statusor.h"
#include "common/model/qwen35_cache.h"
#include "common/model/qwen35_model.h"
#include "common/model/sampling.h"
#include "common/engine/block_drafter.h"
#include "common/engine/generation.h"
#include "common/engine/generation_output.h"
#include "common/engine/regime.h"
#include "common/text/tokenizer.h"

namespace specd::engine {

class SpeculativeDecoder {
 public:
  // `target`, `drafter` and `tokenizer` must outlive the decoder. Without a tokenizer there is no
  // text, and stop strings are refused.
  SpeculativeDecoder(const model::Qwen35Model& target, BlockDrafter& drafter,
                     const text::Tokenizer* tokenizer, const RegimeThresholds& regimes = {});

  // Streams one chunk for the first token, then one per verify step. The result carries the
  // acceptance statistics.
  absl::StatusOr<GenerationResult> Generate(const GenerationRequest& request,
                                            const ChunkCallback& on_chunk = nullptr);

 private:
  // One draft → verify → accept step after the last emitted token.
  absl::Status Step(const GenerationRequest& request, model::Sampler& sampler,
                    model::Qwen35Cache& cache, GenerationOutput& output, AcceptanceStats& stats);

  const model::Qwen35Model& target_;
  BlockDrafter& drafter_;
  const text::Tokenizer* tokenizer_;
  RegimeThresholds regimes_;
  std::optional<model::Qwen35Cache> cache_;
};

}  // namespace specd::engine
