#pragma once
// The engine in one process: requests on a target, optionally drafted by a Drafter, run through
// the one decode loop on in-process ports. `specd generate`, `specd bench spec`, the pipeline's
// evaluation and data regeneration generate with it.
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "common/engine/decode_loop.h"
#include "common/engine/draft_session.h"
#include "common/engine/generation.h"
#include "common/engine/in_process_ports.h"
#include "common/engine/regime.h"
#include "common/engine/speculation_guard.h"
#include "common/model/qwen35_model.h"
#include "common/text/tokenizer.h"

namespace specd::engine {

class Generator {
 public:
  // Target-only. `target` and `tokenizer` must outlive it; without a tokenizer there is no text,
  // and stop strings are refused.
  Generator(const model::Qwen35Model& target, const text::Tokenizer* tokenizer,
            const RegimeThresholds& regimes = {});
  // Speculative with `drafter`, which must outlive it too; fails unless the drafter takes
  // `options`. `guarded`: a SpeculationGuard picks each step's block, up to options' block size;
  // otherwise every block is full.
  static absl::StatusOr<Generator> Speculative(
      const model::Qwen35Model& target, const Drafter& drafter, const text::Tokenizer* tokenizer,
      const DraftOptions& options = {}, const RegimeThresholds& regimes = {}, bool guarded = false);

  // Streams one chunk for the first token, then one per step.
  absl::StatusOr<GenerationResult> Generate(const GenerationRequest& request,
                                            const ChunkCallback& on_chunk = nullptr) const;

  // The block size requests draft with; 1 target-only.
  int64_t block_size() const { return options_.has_value() ? options_->block_size : 1; }

 private:
  Generator(const model::Qwen35Model& target, const Drafter* drafter,
            std::optional<DraftOptions> options, const text::Tokenizer* tokenizer,
            const RegimeThresholds& regimes, bool guarded);

  std::shared_ptr<InProcessPair> pair_;      // shared by copies, which take turns on it
  std::optional<DraftOptions> options_;      // resolved; none: target-only
  std::shared_ptr<SpeculationGuard> guard_;  // null: full blocks
  const text::Tokenizer* tokenizer_;
  RegimeThresholds regimes_;
};

}  // namespace specd::engine
