#pragma once
// Target-only generation: prefill the prompt, then sample and decode one token at a time until a
// stop. It is the baseline that speculative decoding must reproduce token for token (greedy) and
// is measured against.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/qwen35_model.h"
#include "common/model/sampling.h"
#include "common/spec/stop_criteria.h"
#include "common/text/tokenizer.h"

namespace specd::spec {

struct GenerationRequest {
  std::vector<int64_t> prompt;
  model::SamplingParams sampling;  // seeded per request
  StopConfig stop;
};

// What a streaming client receives after each token: the new id and the text it released
// (empty while a character or a possible stop string is held back).
struct GenerationChunk {
  int64_t id = 0;
  std::string text;
};
using ChunkCallback = std::function<void(const GenerationChunk&)>;

struct GenerationTimings {
  double prefill_ms = 0;           // prompt forward and the first token
  double decode_ms_per_token = 0;  // mean over the decode steps (0 when there were none)
  double total_ms = 0;
  double tokens_per_s = 0;  // new tokens over the whole request
};

struct GenerationResult {
  std::vector<int64_t> ids;  // new tokens only, including the EOS or stop token that ended them
  std::string text;          // their text, without a stop string or special tokens
  StopReason stop_reason = StopReason::kNone;
  GenerationTimings timings;
};

class TargetDecoder {
 public:
  // `model` and `tokenizer` must outlive the decoder. Without a tokenizer there is no text, and
  // stop strings are refused.
  TargetDecoder(const model::Qwen35Model& model, const text::Tokenizer* tokenizer);

  absl::StatusOr<GenerationResult> Generate(const GenerationRequest& request,
                                            const ChunkCallback& on_chunk = nullptr);

 private:
  absl::Status Validate(const GenerationRequest& request) const;
  // A cache for `length` tokens, reused across requests while it is large enough.
  absl::StatusOr<model::Qwen35Cache*> CacheFor(int64_t length);

  const model::Qwen35Model& model_;
  const text::Tokenizer* tokenizer_;
  std::optional<model::Qwen35Cache> cache_;
};

}  // namespace specd::spec
