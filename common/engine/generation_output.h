#pragma once
// The output of one request as it grows, shared by every decoder so that all of them stop, stream
// and time alike: each new token is detokenized and passed through the stop criteria, and the
// tokens and text since the last chunk go to the streaming callback together.
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/clock.h"
#include "common/engine/generation.h"
#include "common/engine/stop_criteria.h"
#include "common/text/streaming_detokenizer.h"
#include "common/text/tokenizer.h"

namespace specd::engine {

class GenerationOutput {
 public:
  // The request's clock starts here. Without a tokenizer there is no text. `tokenizer` must
  // outlive this object.
  GenerationOutput(const text::Tokenizer* tokenizer, const StopConfig& stop);

  // Appends a generated token; true once the output has ended (with this token, if it counts).
  absl::StatusOr<bool> Push(int64_t token);

  // Ends the output here (StopReason::kCancelled) unless it has ended already.
  void Cancel();

  // Hands the tokens and text since the last chunk to `on_chunk` (if set and there are any).
  void EmitChunk(const ChunkCallback& on_chunk);

  const std::vector<int64_t>& ids() const { return result_.ids; }
  int64_t size() const { return static_cast<int64_t>(result_.ids.size()); }
  bool stopped() const { return result_.stop_reason != StopReason::kNone; }
  StopReason stop_reason() const { return result_.stop_reason; }
  const std::optional<std::string>& matched_stop_string() const {
    return stop_.matched_stop_string();
  }

  // The result with its timings, as of now.
  GenerationResult Finish() &&;

 private:
  base::Clock::time_point start_;
  std::optional<text::StreamingDetokenizer> detokenizer_;
  StopCriteria stop_;
  GenerationResult result_;
  GenerationChunk chunk_;
};

}  // namespace specd::engine
