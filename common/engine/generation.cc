#include "common/engine/generation.h"

#include "absl/strings/str_cat.h"

namespace specd::engine {

absl::Status ValidateRequest(const GenerationRequest& request, const text::Tokenizer* tokenizer) {
  if (request.prompt.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
  if (request.stop.max_new_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max new tokens must be at least 1, not ", request.stop.max_new_tokens));
  }
  if (!request.stop.stop_strings.empty() && tokenizer == nullptr) {
    return absl::InvalidArgumentError("stop strings need a tokenizer");
  }
  return absl::OkStatus();
}

}  // namespace specd::engine
