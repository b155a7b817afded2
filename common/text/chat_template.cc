#include "common/text/chat_template.h"

#include <string_view>

#include "absl/status/status.h"

namespace specd::text {
namespace {

constexpr std::string_view kAsciiWhiteSpace = " \t\n\r\f\v";

// Jinja's |trim (Python's str.strip()), for the ASCII whitespace that surrounds chat content.
std::string_view Trim(std::string_view text, std::string_view characters = kAsciiWhiteSpace) {
  const size_t begin = text.find_first_not_of(characters);
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(characters) - begin + 1);
}

std::string_view TrimLeadingNewlines(std::string_view text) {
  const size_t begin = text.find_first_not_of('\n');
  return begin == std::string_view::npos ? std::string_view() : text.substr(begin);
}

std::string_view TrimTrailingNewlines(std::string_view text) {
  const size_t end = text.find_last_not_of('\n');
  return end == std::string_view::npos ? std::string_view() : text.substr(0, end + 1);
}

std::string_view RoleName(ChatRole role) {
  switch (role) {
    case ChatRole::kSystem:
      return "system";
    case ChatRole::kUser:
      return "user";
    case ChatRole::kAssistant:
      return "assistant";
  }
  return "";
}

// A user message that only carries a tool result does not count as the user's query.
bool IsToolResponse(std::string_view content) {
  return content.starts_with("<tool_response>") && content.ends_with("</tool_response>");
}

struct AssistantTurn {
  std::string_view reasoning;
  std::string_view answer;
};

// The templates' split of "<think>reasoning</think>answer" when no reasoning is given apart.
AssistantTurn SplitAssistantTurn(const ChatMessage& message, std::string_view content) {
  if (message.reasoning) return {*message.reasoning, content};
  constexpr std::string_view kThinkEnd = "</think>";
  const size_t first_end = content.find(kThinkEnd);
  if (first_end == std::string_view::npos) return {{}, content};
  std::string_view reasoning = TrimTrailingNewlines(content.substr(0, first_end));
  if (const size_t start = reasoning.rfind("<think>"); start != std::string_view::npos) {
    reasoning.remove_prefix(start + std::string_view("<think>").size());
  }
  const size_t last_end = content.rfind(kThinkEnd);
  return {TrimLeadingNewlines(reasoning),
          TrimLeadingNewlines(content.substr(last_end + kThinkEnd.size()))};
}

void AppendMessage(std::string_view role, std::string_view body, std::string& out) {
  out.append("<|im_start|>").append(role).append("\n").append(body).append("<|im_end|>\n");
}

void AppendThinkingTurn(std::string_view reasoning, std::string_view answer, std::string& out) {
  out.append("<|im_start|>assistant\n<think>\n").append(reasoning).append("\n</think>\n\n");
  out.append(answer).append("<|im_end|>\n");
}

// The index of the last user query, or nullopt when there is none.
std::optional<size_t> LastUserQuery(std::span<const ChatMessage> messages, bool trim) {
  for (size_t i = messages.size(); i-- > 0;) {
    if (messages[i].role != ChatRole::kUser) continue;
    const std::string_view content = trim ? Trim(messages[i].content) : messages[i].content;
    if (!IsToolResponse(content)) return i;
  }
  return std::nullopt;
}

std::string RenderQwen3(std::span<const ChatMessage> messages) {
  const size_t last_query = LastUserQuery(messages, /*trim=*/false).value_or(messages.size() - 1);
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& message = messages[i];
    if (message.role != ChatRole::kAssistant) {
      AppendMessage(RoleName(message.role), message.content, out);
      continue;
    }
    const AssistantTurn turn = SplitAssistantTurn(message, message.content);
    const bool is_last = i + 1 == messages.size();
    if (i > last_query && (is_last || !turn.reasoning.empty())) {
      AppendThinkingTurn(Trim(turn.reasoning, "\n"), TrimLeadingNewlines(turn.answer), out);
    } else {
      AppendMessage("assistant", turn.answer, out);
    }
  }
  return out;
}

absl::StatusOr<std::string> RenderQwen3_5(std::span<const ChatMessage> messages) {
  const std::optional<size_t> last_query = LastUserQuery(messages, /*trim=*/true);
  if (!last_query) return absl::InvalidArgumentError("the conversation has no user message");
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& message = messages[i];
    const std::string_view content = Trim(message.content);
    if (message.role == ChatRole::kSystem && i != 0) {
      return absl::InvalidArgumentError("a system message can only be the first message");
    }
    if (message.role != ChatRole::kAssistant) {
      AppendMessage(RoleName(message.role), content, out);
      continue;
    }
    const AssistantTurn turn = SplitAssistantTurn(message, content);
    if (i > *last_query) {
      AppendThinkingTurn(Trim(turn.reasoning), turn.answer, out);
    } else {
      AppendMessage("assistant", turn.answer, out);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> ChatTemplate::Render(std::span<const ChatMessage> messages,
                                                 const ChatRenderOptions& options) const {
  if (messages.empty()) return absl::InvalidArgumentError("the conversation has no messages");
  absl::StatusOr<std::string> out =
      flavor_ == ChatFlavor::kQwen3 ? RenderQwen3(messages) : RenderQwen3_5(messages);
  if (!out.ok() || !options.add_generation_prompt) return out;
  out->append("<|im_start|>assistant\n");
  if (!options.enable_thinking) {
    out->append("<think>\n\n</think>\n\n");
  } else if (flavor_ == ChatFlavor::kQwen3_5) {
    out->append("<think>\n");
  }
  return out;
}

}  // namespace specd::text
