#pragma once
// Training records and their JSONL files, one record per line in the Nemotron layout:
//   {"messages": [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}]}
// an assistant message may carry "reasoning_content"; and a pretraining document is
//   {"text": "..."}
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/text/chat_template.h"

namespace specd::train {

// A chat (messages) or, when `text` is set, a plain document with no messages.
struct Conversation {
  std::vector<text::ChatMessage> messages;
  std::optional<std::string> text = std::nullopt;
};

// One line of JSON, without the newline.
std::string ConversationToJson(const Conversation& conversation);
absl::StatusOr<Conversation> ConversationFromJson(std::string_view line);

// Every line must be a record; blank lines are refused too. Errors name the file and line.
absl::StatusOr<std::vector<Conversation>> ReadConversations(const std::filesystem::path& path);

// Writes the whole file atomically.
absl::Status WriteConversations(const std::filesystem::path& path,
                                std::span<const Conversation> conversations);

}  // namespace specd::train
