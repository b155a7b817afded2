#include "common/text/chat_prompt.h"

namespace specd::text {

absl::StatusOr<std::vector<int64_t>> ChatPromptIds(const Tokenizer& tokenizer,
                                                   const ChatTemplate& chat,
                                                   std::span<const ChatMessage> messages,
                                                   bool enable_thinking) {
  absl::StatusOr<std::string> rendered =
      chat.Render(messages, {.add_generation_prompt = true, .enable_thinking = enable_thinking});
  if (!rendered.ok()) return rendered.status();
  absl::StatusOr<std::vector<TokenId>> ids = tokenizer.Encode(*rendered);
  if (!ids.ok()) return ids.status();
  return std::vector<int64_t>(ids->begin(), ids->end());
}

}  // namespace specd::text
