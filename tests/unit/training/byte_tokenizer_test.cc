// The byte-level tokenizer loads with the project's tokenizer, gives one id per byte and the
// chat specials after them, and round-trips any UTF-8 text.
#include "training/byte_tokenizer.h"

#include <fstream>
#include <string>
#include <vector>

#include "common/text/chat_template.h"
#include "common/text/tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/temp_dir.h"

namespace specd::train {
namespace {

text::Tokenizer WrittenTokenizer(const std::filesystem::path& dir) {
  const absl::Status written = WriteByteLevelTokenizer(dir);
  EXPECT_TRUE(written.ok()) << written;
  absl::StatusOr<text::Tokenizer> tokenizer = text::Tokenizer::FromFile(dir / "tokenizer.json");
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return *std::move(tokenizer);
}

TEST(ByteTokenizerTest, HasTheBytesThenTheChatSpecials) {
  testing::TempDir dir;
  const text::Tokenizer tokenizer = WrittenTokenizer(dir.path());
  EXPECT_EQ(tokenizer.vocab_size(), kByteLevelTokenizerSize);
  EXPECT_EQ(tokenizer.TokenToId("<|endoftext|>"), kByteLevelEndOfTextId);
  EXPECT_EQ(tokenizer.TokenToId("<|im_start|>"), kByteLevelImStartId);
  EXPECT_EQ(tokenizer.TokenToId("<|im_end|>"), kByteLevelImEndId);
  EXPECT_EQ(tokenizer.TokenToId("<think>"), kByteLevelThinkId);
  EXPECT_EQ(tokenizer.TokenToId("</think>"), kByteLevelThinkEndId);
}

TEST(ByteTokenizerTest, EncodesEachByteAsItsOwnId) {
  testing::TempDir dir;
  const text::Tokenizer tokenizer = WrittenTokenizer(dir.path());
  const std::string text = "a \xC3\xA9\n";
  const absl::StatusOr<std::vector<text::TokenId>> ids = tokenizer.Encode(text);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*ids, (std::vector<text::TokenId>{'a', ' ', 0xC3, 0xA9, '\n'}));
}

TEST(ByteTokenizerTest, RoundTripsArbitraryUtf8) {
  testing::TempDir dir;
  const text::Tokenizer tokenizer = WrittenTokenizer(dir.path());
  // Non-NFC "e" + combining acute, CJK, an emoji, controls and runs of white space.
  const std::string text = "e\xCC\x81 \xE6\xBC\xA2\xE5\xAD\x97 \xF0\x9F\x98\x80\t\r\n  x's\x01\x7F";
  const absl::StatusOr<std::vector<text::TokenId>> ids = tokenizer.Encode(text);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->size(), text.size());
  EXPECT_EQ(tokenizer.Decode(*ids).value_or(""), text);
}

TEST(ByteTokenizerTest, EncodesARenderedChatWithSingleSpecialTokens) {
  testing::TempDir dir;
  const text::Tokenizer tokenizer = WrittenTokenizer(dir.path());
  const std::vector<text::ChatMessage> chat = {
      {.role = text::ChatRole::kUser, .content = "hi", .reasoning = std::nullopt}};
  const absl::StatusOr<std::string> rendered =
      text::ChatTemplate(text::ChatFlavor::kQwen3_5).Render(chat);
  ASSERT_TRUE(rendered.ok()) << rendered.status();
  const absl::StatusOr<std::vector<text::TokenId>> ids = tokenizer.Encode(*rendered);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->front(), kByteLevelImStartId);
  EXPECT_EQ(std::count(ids->begin(), ids->end(), kByteLevelImEndId), 1);
  EXPECT_EQ(ids->back(), '\n');
  EXPECT_EQ((*ids)[ids->size() - 2], kByteLevelThinkId);
  EXPECT_EQ(tokenizer.Decode(*ids).value_or(""), *rendered);
}

TEST(ByteTokenizerTest, ConfigNamesImEndAsEosAndEndOfTextAsPad) {
  testing::TempDir dir;
  ASSERT_TRUE(WriteByteLevelTokenizer(dir.path()).ok());
  std::ifstream in(dir.path() / "tokenizer_config.json");
  const nlohmann::json config = nlohmann::json::parse(in);
  EXPECT_EQ(config["eos_token"], "<|im_end|>");
  EXPECT_EQ(config["pad_token"], "<|endoftext|>");
}

TEST(ByteTokenizerTest, ModelVocabularyLeavesTheMaskIdUnusedByTheTokenizer) {
  EXPECT_GE(kByteLevelMaskId, kByteLevelTokenizerSize);
  EXPECT_EQ(kByteLevelMaskId, kByteLevelVocabSize - 1);
  EXPECT_EQ(kByteLevelVocabSize % 16, 0);
}

}  // namespace
}  // namespace specd::train
