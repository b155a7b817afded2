#include "common/engine/decode_loop.h"

#include <utility>

#include "common/base/clock.h"
#include "common/engine/acceptance_stats.h"

namespace specd::engine {

using base::Clock;
using base::MillisecondsSince;
namespace {

// Pushes `tokens` into `output` until it stops; `step` gets the chunk and the logprobs of what
// went in, `result_logprobs` those same logprobs.
absl::Status Emit(const EmittedTokens& tokens, GenerationOutput& output, DecodeStep& step,
                  std::vector<TokenLogprob>& result_logprobs) {
  for (size_t i = 0; i < tokens.ids.size() && !output.stopped(); ++i) {
    if (absl::StatusOr<bool> pushed = output.Push(tokens.ids[i]); !pushed.ok()) {
      return pushed.status();
    }
    if (i < tokens.logprobs.size()) {
      step.logprobs.push_back(tokens.logprobs[i]);
      result_logprobs.push_back(tokens.logprobs[i]);
    }
  }
  output.EmitChunk([&step](const GenerationChunk& chunk) { step.chunk = chunk; });
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GenerationResult> RunDecodeLoop(TargetPort& target, DraftPort* draft,
                                               const text::Tokenizer* tokenizer,
                                               const StopConfig& stop, const DecodeHooks& hooks,
                                               SpeculationGuard::Request* guard) {
  const bool speculative = draft != nullptr;
  GenerationOutput output(tokenizer, stop);
  AcceptanceStats stats;
  std::vector<TokenLogprob> logprobs;
  auto report = [&](const DecodeStep& step) {
    if (hooks.on_step && !hooks.on_step(step, output, stats)) output.Cancel();
  };

  DecodeStep first;
  first.prefill = true;
  Clock::time_point start = Clock::now();
  absl::StatusOr<EmittedTokens> prefill = target.Prefill();
  if (!prefill.ok()) return prefill.status();
  first.target_ms = MillisecondsSince(start);
  if (absl::Status emitted = Emit(*prefill, output, first, logprobs); !emitted.ok()) {
    return emitted;
  }
  report(first);

  while (!output.stopped()) {
    if (hooks.cancelled && hooks.cancelled()) {
      output.Cancel();
      break;
    }
    DecodeStep step;
    // The step emits at most one token per block position: drafts stop where the output must.
    const int64_t room = stop.max_new_tokens - output.size();
    Drafts drafts;
    const bool guarded = guard != nullptr && draft != nullptr;
    const int64_t block = guarded ? guard->Choose(room) : room;
    if (guarded) step.guard = guard->last();
    // A guarded step of one token still tells the draft port, asking for no drafts, so that no
    // draft batcher waits for this request (DraftPort::Propose).
    if (draft != nullptr && room > 1) {
      start = Clock::now();
      absl::StatusOr<Drafts> proposed = draft->Propose(output.ids().back(), block - 1);
      step.draft_ms = MillisecondsSince(start);
      stats.draft_ms += *step.draft_ms;
      if (proposed.ok()) {
        drafts = *std::move(proposed);
      } else {
        // The output never depends on the drafter, so losing it costs speed only.
        step.drafter_failure = proposed.status();
        draft = nullptr;
      }
    }
    start = Clock::now();
    absl::StatusOr<EmittedTokens> verified = target.Verify(drafts);
    if (!verified.ok()) return verified.status();
    step.target_ms = MillisecondsSince(start);
    stats.verify_ms += step.target_ms;
    step.proposed = static_cast<int64_t>(drafts.tokens.size());
    step.accepted = verified->accepted();
    if (guarded && step.drafter_failure.ok()) {
      guard->Record(drafts, *verified, step.draft_ms, step.target_ms);
    }
    const int64_t before = output.size();
    if (absl::Status emitted = Emit(*verified, output, step, logprobs); !emitted.ok()) {
      return emitted;
    }
    stats.RecordStep(step.proposed, step.accepted, output.size() - before);
    report(step);
  }
  GenerationResult result = std::move(output).Finish();
  result.logprobs = std::move(logprobs);
  if (speculative) result.acceptance = std::move(stats);
  return result;
}

}  // namespace specd::engine
