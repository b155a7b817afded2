#pragma once
// Target-only generation: prefill the prompt, then sample and decode one token at a time until a
// stop. It is the baseline that speculative decoding must reproduce token for token (greedy) and
// is measured against.
#include <optional>

#include "absl/status/statusor.h"
#include "common/model/qwen35_model.h"
#include "common/engine/generation.h"
#include "common/engine/regime.h"
#include "common/text/tokenizer.h"

namespace specd::engine {

class TargetDecoder {
 public:
  // `model` and `tokenizer` must outlive the decoder. Without a tokenizer there is no text, and
  // stop strings are refused.
  TargetDecoder(const model::Qwen35Model& model, const text::Tokenizer* tokenizer,
                const RegimeThresholds& regimes = {});

  // Streams one chunk per token.
  absl::StatusOr<GenerationResult> Generate(const GenerationRequest& request,
                                            const ChunkCallback& on_chunk = nullptr);

 private:
  const model::Qwen35Model& model_;
  const text::Tokenizer* tokenizer_;
  RegimeThresholds regimes_;
  std::optional<model::Qwen35Cache> cache_;
};

}  // namespace specd::engine
