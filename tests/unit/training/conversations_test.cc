// Conversation JSONL in the Nemotron layout: chats and plain texts round-trip, and a malformed
// line is refused with its line number.
#include "training/conversations.h"

#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace specd::train {
namespace {

using text::ChatRole;

void WriteText(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(ConversationsTest, ReadsTheNemotronLayout) {
  const absl::StatusOr<Conversation> conversation = ConversationFromJson(
      R"({"messages": [{"role": "system", "content": "Be brief."},)"
      R"( {"role": "user", "content": "Hi"},)"
      R"( {"role": "assistant", "content": "Hello", "reasoning_content": "greet"}]})");
  ASSERT_TRUE(conversation.ok()) << conversation.status();
  ASSERT_EQ(conversation->messages.size(), 3);
  EXPECT_EQ(conversation->messages[0].role, ChatRole::kSystem);
  EXPECT_EQ(conversation->messages[1].content, "Hi");
  EXPECT_EQ(conversation->messages[2].role, ChatRole::kAssistant);
  EXPECT_EQ(conversation->messages[2].reasoning, "greet");
  EXPECT_FALSE(conversation->text.has_value());
}

TEST(ConversationsTest, ReadsAPlainTextRecord) {
  const absl::StatusOr<Conversation> record = ConversationFromJson(R"({"text": "a document"})");
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->text, "a document");
  EXPECT_TRUE(record->messages.empty());
}

TEST(ConversationsTest, FileRoundTripsChatsAndTexts) {
  testing::TempDir dir;
  const std::vector<Conversation> written = {
      {.messages = {{.role = ChatRole::kUser, .content = "line\nbreak \"q\"", .reasoning = {}},
                    {.role = ChatRole::kAssistant, .content = "\xC3\xA9", .reasoning = "r"}},
       .text = std::nullopt},
      {.messages = {}, .text = "plain"}};
  ASSERT_TRUE(WriteConversations(dir.path() / "c.jsonl", written).ok());
  const absl::StatusOr<std::vector<Conversation>> read = ReadConversations(dir.path() / "c.jsonl");
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 2);
  EXPECT_EQ(ConversationToJson((*read)[0]), ConversationToJson(written[0]));
  EXPECT_EQ((*read)[1].text, "plain");
}

TEST(ConversationsTest, RefusesAMalformedLineWithItsNumber) {
  testing::TempDir dir;
  WriteText(dir.path() / "c.jsonl",
            "{\"text\": \"ok\"}\n{\"text\": \"ok\"}\n{\"messages\": [{\"role\": \"user\"}]}\n");
  const absl::StatusOr<std::vector<Conversation>> read = ReadConversations(dir.path() / "c.jsonl");
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("c.jsonl:3:"), std::string::npos) << read.status();
}

TEST(ConversationsTest, RefusesAnUnknownRole) {
  const absl::StatusOr<Conversation> conversation =
      ConversationFromJson(R"({"messages": [{"role": "tool", "content": "x"}]})");
  ASSERT_FALSE(conversation.ok());
  EXPECT_NE(conversation.status().message().find("\"tool\""), std::string::npos);
}

TEST(ConversationsTest, RefusesARecordWithBothMessagesAndText) {
  EXPECT_FALSE(ConversationFromJson(R"({"messages": [], "text": "x"})").ok());
  EXPECT_FALSE(ConversationFromJson(R"({"other": 1})").ok());
  EXPECT_FALSE(ConversationFromJson("not json").ok());
}

}  // namespace
}  // namespace specd::train
