#include "training/conversations.h"

#include <cstddef>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/io/atomic_file.h"
#include "nlohmann/json.hpp"

namespace specd::train {
namespace {

using Json = nlohmann::json;

const char* RoleName(text::ChatRole role) {
  switch (role) {
    case text::ChatRole::kSystem:
      return "system";
    case text::ChatRole::kUser:
      return "user";
    case text::ChatRole::kAssistant:
      return "assistant";
  }
  return "";
}

absl::StatusOr<text::ChatRole> ParseRole(const Json& role) {
  if (role == "system") return text::ChatRole::kSystem;
  if (role == "user") return text::ChatRole::kUser;
  if (role == "assistant") return text::ChatRole::kAssistant;
  return absl::InvalidArgumentError(
      absl::StrCat("role ", role.dump(), " (supported: system, user, assistant)"));
}

absl::StatusOr<std::string> StringMember(const Json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" is missing or not a string"));
  }
  return it->get<std::string>();
}

absl::StatusOr<text::ChatMessage> ParseMessage(const Json& json) {
  if (!json.is_object()) return absl::InvalidArgumentError("a message is not an object");
  const auto role = json.find("role");
  if (role == json.end()) return absl::InvalidArgumentError("a message has no \"role\"");
  absl::StatusOr<text::ChatRole> parsed_role = ParseRole(*role);
  if (!parsed_role.ok()) return parsed_role.status();
  absl::StatusOr<std::string> content = StringMember(json, "content");
  if (!content.ok()) return content.status();
  text::ChatMessage message{
      .role = *parsed_role, .content = *std::move(content), .reasoning = std::nullopt};
  if (json.contains("reasoning_content") && !json["reasoning_content"].is_null()) {
    absl::StatusOr<std::string> reasoning = StringMember(json, "reasoning_content");
    if (!reasoning.ok()) return reasoning.status();
    message.reasoning = *std::move(reasoning);
  }
  return message;
}

}  // namespace

std::string ConversationToJson(const Conversation& conversation) {
  Json json;
  if (conversation.text) {
    json["text"] = *conversation.text;
  } else {
    json["messages"] = Json::array();
    for (const text::ChatMessage& message : conversation.messages) {
      Json entry = {{"role", RoleName(message.role)}, {"content", message.content}};
      if (message.reasoning) entry["reasoning_content"] = *message.reasoning;
      json["messages"].push_back(std::move(entry));
    }
  }
  // Text decoded from sampled tokens is valid UTF-8 (U+FFFD repairs it); replace is a safety net.
  return json.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

absl::StatusOr<Conversation> ConversationFromJson(std::string_view line) {
  const Json json = Json::parse(line, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  if (!json.is_object()) return absl::InvalidArgumentError("not a JSON object");
  const bool has_messages = json.contains("messages");
  if (has_messages == json.contains("text")) {
    return absl::InvalidArgumentError("a record needs exactly one of \"messages\" and \"text\"");
  }
  Conversation conversation;
  if (!has_messages) {
    absl::StatusOr<std::string> text = StringMember(json, "text");
    if (!text.ok()) return text.status();
    conversation.text = *std::move(text);
    return conversation;
  }
  const Json& messages = json["messages"];
  if (!messages.is_array() || messages.empty()) {
    return absl::InvalidArgumentError("\"messages\" is not a non-empty array");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    absl::StatusOr<text::ChatMessage> message = ParseMessage(messages[i]);
    if (!message.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("message ", i, ": ", message.status().message()));
    }
    conversation.messages.push_back(*std::move(message));
  }
  return conversation;
}

absl::StatusOr<std::vector<Conversation>> ReadConversations(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path.string()));
  std::vector<Conversation> conversations;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    absl::StatusOr<Conversation> conversation = ConversationFromJson(line);
    if (!conversation.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path.string(), ":", number, ": ", conversation.status().message()));
    }
    conversations.push_back(*std::move(conversation));
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read ", path.string()));
  return conversations;
}

absl::Status WriteConversations(const std::filesystem::path& path,
                                std::span<const Conversation> conversations) {
  absl::StatusOr<io::AtomicFile> file = io::AtomicFile::Create(path);
  if (!file.ok()) return file.status();
  for (const Conversation& conversation : conversations) {
    const std::string line = ConversationToJson(conversation) + "\n";
    if (absl::Status status = file->Append(std::as_bytes(std::span(line))); !status.ok()) {
      return status;
    }
  }
  return file->Commit();
}

}  // namespace specd::train
