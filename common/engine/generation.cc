#include "common/engine/generation.h"

#include "absl/strings/str_cat.h"

namespace specd::engine {

absl::Status ValidateRequest(const GenerationRequest& request, const io::Qwen35TextConfig& config,
                             const text::Tokenizer* tokenizer) {
  if (request.prompt.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
  if (request.stop.max_new_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max new tokens must be at least 1, not ", request.stop.max_new_tokens));
  }
  if (!request.stop.stop_strings.empty() && tokenizer == nullptr) {
    return absl::InvalidArgumentError("stop strings need a tokenizer");
  }
  for (const int64_t id : request.prompt) {
    if (id < 0 || id >= config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt token ", id, " is outside the model's vocabulary of ", config.vocab_size));
    }
  }
  return absl::OkStatus();
}

}  // namespace specd::engine
