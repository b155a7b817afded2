#pragma once
// A request's prompt (generation.proto's Prompt: text, a chat or token ids) as the token ids the
// verifier prefills, with INVALID_ARGUMENT naming the field for anything unusable.
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/text/chat_template.h"
#include "common/text/tokenizer.h"
#include "specd/v1/generation.pb.h"

namespace specd::orchestrator {

struct PromptLimits {
  int64_t vocab_size = 0;
  // Longest prompt: the context minus room for one new token.
  int64_t max_prompt_tokens = 0;
};

// `tokenizer` may be null: then only token ids are accepted. Chats are rendered with `chat`.
absl::StatusOr<std::vector<int64_t>> PromptIds(const v1::Prompt& prompt,
                                               const text::Tokenizer* tokenizer,
                                               const text::ChatTemplate& chat,
                                               const PromptLimits& limits);

}  // namespace specd::orchestrator
