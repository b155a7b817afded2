#pragma once
// THE decode loop: every request, in process or served, is driven by this one function. After the
// prefill's first token, each step asks the draft port for up to B − 1 proposals, has the target
// port verify them in one forward, and emits the accepted drafts plus the target's own token,
// until a stop criterion ends the output. Blocks are cut to the tokens the request may still
// emit, so the last step stops exactly where target-only decoding would. A drafter that fails
// costs speed, never the request: the rest of it runs target-only (Verify without drafts). With a
// speculation guard, each step's block is the guard's choice (1: a draft call for no drafts).
//
// The target chooses every emitted token (research/dflash.md §3, "sample and match"), so the
// output is the same with any drafter or none: greedy token for token, sampled the same
// distribution (and, for the same seed, the same sequence up to float rounding).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/engine/acceptance_stats.h"
#include "common/engine/generation.h"
#include "common/engine/generation_output.h"
#include "common/engine/ports.h"
#include "common/engine/speculation_guard.h"
#include "common/engine/stop_criteria.h"
#include "common/text/tokenizer.h"

namespace specd::engine {

// What one step did, as the loop reports it.
struct DecodeStep {
  bool prefill = false;
  GenerationChunk chunk;               // the tokens it added to the output and the text released
  std::vector<TokenLogprob> logprobs;  // one per chunk token, when asked for
  std::optional<GuardChoice> guard;    // the speculation guard's choice, when it chose
  int64_t proposed = 0;                // drafts verified (0: a target-only step)
  int64_t accepted = 0;
  std::optional<double> draft_ms;  // the draft port's call, when it was asked
  double target_ms = 0;            // the prefill or verify call
  // Set on the step where the drafter failed; that step and every later one are target-only.
  absl::Status drafter_failure = absl::OkStatus();
};

struct DecodeHooks {
  // After every step; false ends the request there (StopReason::kCancelled).
  std::function<bool(const DecodeStep&, const GenerationOutput&, const AcceptanceStats&)> on_step =
      nullptr;
  // Before every step after the prefill; true ends the request there (kCancelled).
  std::function<bool()> cancelled = nullptr;
};

// Runs one request to its end on `target`, drafting with `draft` (null: target-only) blocks of
// the size `guard` chooses (null: every block as full as the draft port and the output allow).
// Text needs a tokenizer. The result carries acceptance statistics when there was a draft port;
// its regime is the caller's to set.
absl::StatusOr<GenerationResult> RunDecodeLoop(TargetPort& target, DraftPort* draft,
                                               const text::Tokenizer* tokenizer,
                                               const StopConfig& stop,
                                               const DecodeHooks& hooks = {},
                                               SpeculationGuard::Request* guard = nullptr);

}  // namespace specd::engine
