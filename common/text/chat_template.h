#pragma once
// The Qwen chat templates (ChatML with <think> blocks) for text conversations, reproducing the
// Jinja templates shipped in the models' tokenizer_config.json without their tool and image
// branches:
//   <|im_start|>{role}\n{content}<|im_end|>\n   per message, then the generation prompt.
// The flavors differ in more than the generation prompt, so each is rendered as its own
// template does.
#include <optional>
#include <span>
#include <string>

#include "absl/status/statusor.h"

namespace specd::text {

enum class ChatRole { kSystem, kUser, kAssistant };

struct ChatMessage {
  ChatRole role;
  std::string content;
  // An assistant turn's reasoning (HF's reasoning_content). When absent, a
  // "<think>...</think>" prefix of `content` is taken as the reasoning, as the templates do.
  std::optional<std::string> reasoning = std::nullopt;
};

enum class ChatFlavor {
  // Qwen3: contents verbatim; a <think> block only on the last assistant turn after the last
  // user query or on turns with reasoning; generation prompt "<|im_start|>assistant\n", the model
  // opens <think> itself.
  kQwen3,
  // Qwen3.5: contents trimmed; a <think> block (empty without reasoning) on every assistant turn
  // after the last user query; the generation prompt opens <think>; the system message must come
  // first and some user message must exist.
  kQwen3_5,
};

struct ChatRenderOptions {
  bool add_generation_prompt = true;
  // Off appends an empty think block to the generation prompt, which makes the model answer
  // directly.
  bool enable_thinking = true;
};

class ChatTemplate {
 public:
  explicit ChatTemplate(ChatFlavor flavor) : flavor_(flavor) {}

  // Fails where the flavor's template raises an exception.
  absl::StatusOr<std::string> Render(std::span<const ChatMessage> messages,
                                     const ChatRenderOptions& options = {}) const;

 private:
  ChatFlavor flavor_;
};

}  // namespace specd::text
