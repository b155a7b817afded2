#pragma once
// One request's sequence on the target: its cache, sampler, prompt and output so far. A prefill
// runs the prompt (in chunks of fixed size, so its arithmetic never depends on what else runs)
// and samples the first token; each verify runs one block [anchor, drafts…] in one forward, emits
// the drafts the target accepts plus its own next token (AcceptDrafts) and
// rolls the cache back to them. Each step returns the positions it committed with their tapped
// hidden states, which the drafter takes in next. A step is begun, fed forward by forward — the
// TargetBatcher puts many sessions' forwards into one — and returned by the forward that ends it.
// In-process ports and the target-verifier service's table both hold these.
#include <cstdint>
#include <optional>
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
  // Prompt tokens per prefill forward: attention materialises [heads, T, context] scores, and a
  // long prompt in pieces lets other sequences' steps run between them.
  int64_t prefill_chunk = 512;
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

  // The prefill; once, first.
  absl::Status BeginPrefill();
  // After the prefill, with up to the room left minus one drafts (OUT_OF_RANGE beyond it,
  // INVALID_ARGUMENT for ids outside the vocabulary or distributions CheckDraftDistributions
  // refuses; neither changes anything).
  absl::Status BeginVerify(const Drafts& drafts);

  // The next forward of the step begun: a prompt chunk, or the whole block. Valid until
  // FinishForward.
  model::SequenceInput NextForward();
  // Rows NextForward feeds, and whether they are a verify block (which goes before prompt chunks).
  int64_t next_rows() const;
  bool verifying() const { return phase_ == Phase::kVerify; }
  // Takes the output of NextForward's forward; the step, once its last forward ran. An error
  // (including a failed forward's, which the caller passes in) is INTERNAL for LibTorch failures
  // and leaves the session unusable.
  std::optional<absl::StatusOr<TargetStep>> FinishForward(
      absl::StatusOr<model::ForwardOutput> output);

  uint64_t seed() const { return options_.sampling.seed; }

 private:
  enum class Phase { kIdle, kPrefill, kVerify, kBroken };

  // Tokens the sequence may still take.
  int64_t room() const;
  absl::StatusOr<TargetStep> FinishPrefill(const model::ForwardOutput& last_chunk);
  absl::StatusOr<TargetStep> FinishVerify(const model::ForwardOutput& output);
  TargetSession(const model::Qwen35Model& target, TargetSessionOptions options,
                model::Qwen35Cache cache);

  // The committed rows [0, count) of `hidden_states` side by side; undefined without taps.
  at::Tensor ContextRows(const std::vector<at::Tensor>& hidden_states, int64_t count) const;
  std::vector<TokenLogprob> Logprobs(const at::Tensor& logits, int64_t count) const;
  // The anchor is always kept, so a block of the anchor alone (target-only decoding) has nothing
  // to roll back: its forward keeps nothing for one and updates the states in place.
  bool HasDrafts() const { return block_.size() > 1; }

  const model::Qwen35Model* target_;
  TargetSessionOptions options_;
  model::Qwen35Cache cache_;
  model::Sampler sampler_;
  std::vector<int64_t> generated_;  // emitted tokens; the last is the pending anchor
  Phase phase_ = Phase::kIdle;
  int64_t prefilled_ = 0;                               // prompt tokens fed so far
  std::vector<at::Tensor> prompt_rows_;                 // their context rows, chunk by chunk
  std::vector<int64_t> block_;                          // the verify block in flight
  std::vector<DraftDistribution> draft_distributions_;  // its drafts', when drawn
};

// OK when every id of `ids` is in a vocabulary of `vocab_size`.
absl::Status CheckTokenIds(std::span<const int64_t> ids, int64_t vocab_size);

}  // namespace specd::engine
