#include "common/engine/generation_output.h"

#include <string>
#include <utility>

#include "absl/status/status.h"

namespace specd::engine {

using base::Clock;
using base::MillisecondsSince;

GenerationOutput::GenerationOutput(const text::Tokenizer* tokenizer, const StopConfig& stop)
    : start_(Clock::now()), stop_(stop) {
  if (tokenizer != nullptr) {
    // The model's padded embedding rows are its to sample; they stand for no text.
    detokenizer_.emplace(*tokenizer,
                         text::DecodeOptions{.skip_special_tokens = stop.skip_special_tokens,
                                             .skip_unknown_ids = true});
  }
}

absl::StatusOr<bool> GenerationOutput::Push(int64_t token) {
  if (stopped()) return absl::FailedPreconditionError("the output has already ended");
  if (result_.ids.empty()) result_.timings.prefill_ms = MillisecondsSince(start_);
  std::string piece;
  if (detokenizer_.has_value()) {
    absl::StatusOr<std::string> text = detokenizer_->Push(static_cast<text::TokenId>(token));
    if (!text.ok()) return text.status();
    piece = *std::move(text);
  }
  result_.ids.push_back(token);
  chunk_.ids.push_back(token);
  StopCriteria::Step step = stop_.Push(token, piece);
  if (step.reason != StopReason::kNone) {
    if (step.reason != StopReason::kStopString && detokenizer_.has_value()) {
      step.released_text += stop_.Finish() + detokenizer_->Flush();
    }
    result_.stop_reason = step.reason;
  }
  result_.text += step.released_text;
  chunk_.text += step.released_text;
  return stopped();
}

void GenerationOutput::Cancel() {
  if (!stopped()) result_.stop_reason = StopReason::kCancelled;
}

void GenerationOutput::EmitChunk(const ChunkCallback& on_chunk) {
  if (on_chunk && !chunk_.ids.empty()) on_chunk(chunk_);
  chunk_ = {};
}

GenerationResult GenerationOutput::Finish() && {
  GenerationTimings& timings = result_.timings;
  timings.total_ms = MillisecondsSince(start_);
  const auto tokens = static_cast<double>(result_.ids.size());
  timings.decode_ms_per_token =
      tokens > 1 ? (timings.total_ms - timings.prefill_ms) / (tokens - 1) : 0;
  timings.tokens_per_s = 1000.0 * tokens / timings.total_ms;
  return std::move(result_);
}

}  // namespace specd::engine
