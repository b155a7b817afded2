#pragma once
// One request's sequence on the target: its cache, sampler, prompt and output so far. Prefill runs
// the prompt and samples the first token; each Verify runs one block [anchor, drafts…] in one
// forward, emits the drafts that equal the target's own choice plus the target's next token
// (AcceptDrafts) and rolls the cache back to them. Each step returns the positions it committed
// with their tapped hidden states, which the drafter takes in next. In-process ports call it
// directly; the target-verifier service is a table of these.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/draft_session.h"
#include "common/engine/ports.h"
#include "common/model/qwen35_cache.h"
#include "common/model/qwen35_model.h"
#include "common/model/sampling.h"

namespace specd::engine {

struct TargetSessionOptions {
  std::vector<int64_t> prompt;
  model::SamplingParams sampling;  // seeded by the caller
  // Tokens that end the output, so acceptance stops at them: EOS (unless ignored) and stop ids.
  std::vector<int64_t> ending_ids = {};
  // The ForwardOptions::hidden_states indices the drafter reads (Drafter::TargetHiddenStates).
  std::vector<int64_t> hidden_states = {};
  // The most tokens the sequence may hold, prompt and output together.
  int64_t max_length = 0;
  // -1: no log-probabilities; k ≥ 0: each emitted token's, with its row's k most likely tokens.
  int64_t top_logprobs = -1;
};

struct TargetStep {
  EmittedTokens tokens;
  // The positions the step committed to the cache (the prompt; the anchor and accepted drafts).
  CommittedContext context;
};

class TargetSession {
 public:
  // INVALID_ARGUMENT for an empty prompt or an id outside the vocabulary, OUT_OF_RANGE when the
  // prompt leaves no room for a token. `target` must outlive the session.
  static absl::StatusOr<TargetSession> Open(const model::Qwen35Model& target,
                                            TargetSessionOptions options);

  // Once, first. A LibTorch failure is INTERNAL and leaves the session unusable.
  absl::StatusOr<TargetStep> Prefill();
  // After Prefill, with up to the room left minus one drafts (OUT_OF_RANGE beyond it,
  // INVALID_ARGUMENT for ids outside the vocabulary; neither changes anything).
  absl::StatusOr<TargetStep> Verify(std::span<const int64_t> drafts);

  uint64_t seed() const { return options_.sampling.seed; }

 private:
  // Tokens the sequence may still take.
  int64_t room() const;
  TargetSession(const model::Qwen35Model& target, TargetSessionOptions options,
                model::Qwen35Cache cache);

  // The committed rows [0, count) of `hidden_states` side by side; undefined without taps.
  at::Tensor ContextRows(const std::vector<at::Tensor>& hidden_states, int64_t count) const;
  std::vector<TokenLogprob> Logprobs(const at::Tensor& logits, int64_t count) const;

  const model::Qwen35Model* target_;
  TargetSessionOptions options_;
  model::Qwen35Cache cache_;
  model::Sampler sampler_;
  std::vector<int64_t> generated_;  // emitted tokens; the last is the pending anchor
};

// OK when every id of `ids` is in a vocabulary of `vocab_size`.
absl::Status CheckTokenIds(std::span<const int64_t> ids, int64_t vocab_size);

}  // namespace specd::engine
