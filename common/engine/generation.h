#pragma once
// A generation request and what comes back, the same for target-only and speculative decoding so
// that either can serve a request and the two can be compared token for token.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/engine/acceptance_stats.h"
#include "common/engine/ports.h"
#include "common/engine/regime.h"
#include "common/engine/stop_criteria.h"
#include "common/model/sampling.h"
#include "common/text/tokenizer.h"

namespace specd::engine {

struct GenerationRequest {
  std::vector<int64_t> prompt;
  model::SamplingParams sampling;  // seeded per request
  StopConfig stop;
  // -1: none; k ≥ 0: each new token's log-probability under the target, with k alternatives.
  int64_t top_logprobs = -1;
};

// What a streaming client receives as the output grows: the new ids (one per decode step, or a
// verify step's accepted tokens) and the text they released (empty while a character or a
// possible stop string is held back).
struct GenerationChunk {
  std::vector<int64_t> ids;
  std::string text;
};
using ChunkCallback = std::function<void(const GenerationChunk&)>;

struct GenerationTimings {
  double prefill_ms = 0;  // the prompt's forward (target and drafter) and the first token
  // The time after the first token over the tokens after it (0 when there were none).
  double decode_ms_per_token = 0;
  double total_ms = 0;
  double tokens_per_s = 0;  // new tokens over the whole request
};

struct GenerationResult {
  std::vector<int64_t> ids;  // new tokens only, including the EOS or stop token that ended them
  std::string text;          // their text, without a stop string or special tokens
  StopReason stop_reason = StopReason::kNone;
  GenerationTimings timings;
  std::vector<TokenLogprob> logprobs;         // one per id, when the request asked
  Regime regime = Regime::kShort;             // by prompt length
  std::optional<AcceptanceStats> acceptance;  // speculative decoding only
};

// OK when `request` has a prompt, asks for at least one new token and has a tokenizer if it has
// stop strings (the target session checks the ids against its vocabulary).
absl::Status ValidateRequest(const GenerationRequest& request, const text::Tokenizer* tokenizer);

}  // namespace specd::engine
