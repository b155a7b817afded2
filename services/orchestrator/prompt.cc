#include "services/orchestrator/prompt.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/text/chat_prompt.h"

namespace specd::orchestrator {
namespace {

absl::StatusOr<text::ChatRole> ChatRoleNamed(const std::string& role) {
  if (role == "system") return text::ChatRole::kSystem;
  if (role == "user") return text::ChatRole::kUser;
  if (role == "assistant") return text::ChatRole::kAssistant;
  return absl::InvalidArgumentError(absl::StrCat("prompt.chat.messages: role \"", role,
                                                 "\" is not one of system, user, assistant"));
}

absl::StatusOr<std::vector<int64_t>> ChatIds(const v1::ChatInput& chat,
                                             const text::Tokenizer& tokenizer,
                                             const text::ChatTemplate& chat_template) {
  if (chat.messages().empty()) {
    return absl::InvalidArgumentError("prompt.chat.messages is empty");
  }
  std::vector<text::ChatMessage> messages;
  for (const v1::ChatMessage& message : chat.messages()) {
    absl::StatusOr<text::ChatRole> role = ChatRoleNamed(message.role());
    if (!role.ok()) return role.status();
    text::ChatMessage rendered{.role = *role, .content = message.content()};
    if (!message.reasoning_content().empty()) rendered.reasoning = message.reasoning_content();
    messages.push_back(std::move(rendered));
  }
  absl::StatusOr<std::vector<int64_t>> ids = text::ChatPromptIds(
      tokenizer, chat_template, messages,
      /*enable_thinking=*/!chat.has_enable_thinking() || chat.enable_thinking());
  if (!ids.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("prompt.chat: ", ids.status().message()));
  }
  return ids;
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> PromptIds(const v1::Prompt& prompt,
                                               const text::Tokenizer* tokenizer,
                                               const text::ChatTemplate& chat,
                                               const PromptLimits& limits) {
  std::vector<int64_t> ids;
  if (prompt.kind_case() == v1::Prompt::kTokenIds) {
    ids.assign(prompt.token_ids().ids().begin(), prompt.token_ids().ids().end());
  } else if (prompt.kind_case() == v1::Prompt::KIND_NOT_SET) {
    return absl::InvalidArgumentError("prompt: give text, chat or token_ids");
  } else {
    if (tokenizer == nullptr) {
      return absl::InvalidArgumentError(
          "prompt: this server has no tokenizer, so it takes token_ids only");
    }
    if (prompt.kind_case() == v1::Prompt::kChat) {
      absl::StatusOr<std::vector<int64_t>> chat_ids = ChatIds(prompt.chat(), *tokenizer, chat);
      if (!chat_ids.ok()) return chat_ids.status();
      ids = *std::move(chat_ids);
    } else {
      absl::StatusOr<std::vector<text::TokenId>> encoded = tokenizer->Encode(prompt.text());
      if (!encoded.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("prompt: ", encoded.status().message()));
      }
      ids.assign(encoded->begin(), encoded->end());
    }
  }
  if (ids.empty()) return absl::InvalidArgumentError("prompt: it is empty");
  if (static_cast<int64_t>(ids.size()) > limits.max_prompt_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt: ", ids.size(), " tokens exceed the longest prompt of ", limits.max_prompt_tokens));
  }
  for (const int64_t id : ids) {
    if (id < 0 || id >= limits.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt: token id ", id, " is outside the vocabulary of ", limits.vocab_size));
    }
  }
  return ids;
}

}  // namespace specd::orchestrator
