#pragma once
// A chat as the prompt a model continues: its messages rendered by the chat template with the
// generation prompt after them, then encoded. Serving, regeneration and evaluation all build
// chat prompts here.
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "common/text/chat_template.h"
#include "common/text/tokenizer.h"

namespace specd::text {

absl::StatusOr<std::vector<int64_t>> ChatPromptIds(const Tokenizer& tokenizer,
                                                   const ChatTemplate& chat,
                                                   std::span<const ChatMessage> messages,
                                                   bool enable_thinking);

}  // namespace specd::text
