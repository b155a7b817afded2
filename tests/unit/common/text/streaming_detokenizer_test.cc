#include "common/text/streaming_detokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/common/text/qwen3_tokenizer.h"

namespace specd::text {
namespace {

TEST(StreamingDetokenizerTest, HoldsBackACharacterUntilItsLastTokenArrives) {
  const Tokenizer& tokenizer = Qwen3Tokenizer();
  const std::vector<TokenId> ids = *tokenizer.Encode("a🫠");  // the emoji spans three tokens
  ASSERT_EQ(ids.size(), 4u);
  StreamingDetokenizer stream(tokenizer);
  EXPECT_EQ(*stream.Push(ids[0]), "a");
  EXPECT_EQ(*stream.Push(ids[1]), "");
  EXPECT_EQ(*stream.Push(ids[2]), "");
  EXPECT_EQ(*stream.Push(ids[3]), "🫠");
  EXPECT_EQ(stream.Flush(), "");
}

TEST(StreamingDetokenizerTest, PiecesConcatenateToTheFullDecode) {
  const Tokenizer& tokenizer = Qwen3Tokenizer();
  const std::string text =
      "emoji 🫠👍🏽 family 👨‍👩‍👧 中文測試 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 "
      "ꙮ龘 "
      "<|im_end|> "
      "done";
  const std::vector<TokenId> ids = *tokenizer.Encode(text);
  StreamingDetokenizer stream(tokenizer);
  std::string streamed;
  for (const TokenId id : ids) {
    const std::string piece = *stream.Push(id);
    streamed += piece;
    EXPECT_EQ(piece.find("\uFFFD"), std::string::npos) << "no piece splits a character";
  }
  streamed += stream.Flush();
  EXPECT_EQ(streamed, *tokenizer.Decode(ids));
  EXPECT_EQ(streamed, text);
}

TEST(StreamingDetokenizerTest, FlushTurnsAnUnfinishedCharacterIntoAReplacementCharacter) {
  const Tokenizer& tokenizer = Qwen3Tokenizer();
  const std::vector<TokenId> ids = *tokenizer.Encode("🫠");
  StreamingDetokenizer stream(tokenizer);
  EXPECT_EQ(*stream.Push(ids[0]), "");
  EXPECT_EQ(stream.Flush(), "\uFFFD");
  EXPECT_EQ(stream.Flush(), "");
}

TEST(StreamingDetokenizerTest, SkipsSpecialTokensWhenAskedTo) {
  const Tokenizer& tokenizer = Qwen3Tokenizer();
  StreamingDetokenizer stream(tokenizer, {.skip_special_tokens = true, .skip_unknown_ids = false});
  EXPECT_EQ(*stream.Push(*tokenizer.TokenToId("<|im_end|>")), "");
  EXPECT_EQ(*stream.Push(*tokenizer.TokenToId("<think>")), "<think>");
}

// A model's padded embedding rows (Qwen3.5: 151,936 for 151,669 tokens) are its to sample: a
// generation's detokenizer decodes them to nothing, as transformers does.
TEST(StreamingDetokenizerTest, CanDecodeAnIdPastTheTokenizersTokensToNothing) {
  const Tokenizer& tokenizer = Qwen3Tokenizer();
  const std::vector<TokenId> ids = *tokenizer.Encode("Hi there");
  ASSERT_EQ(ids.size(), 2u);
  StreamingDetokenizer stream(tokenizer, {.skip_special_tokens = false, .skip_unknown_ids = true});
  std::string text;
  for (const TokenId id : {ids[0], TokenId{151'935}, ids[1]}) text += *stream.Push(id);
  EXPECT_EQ(text, "Hi there");
  EXPECT_EQ(stream.Push(-5).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(StreamingDetokenizerTest, RejectsAnUnknownIdAndCarriesOn) {
  const Tokenizer& tokenizer = Qwen3Tokenizer();
  const std::vector<TokenId> ids = *tokenizer.Encode("🫠");
  StreamingDetokenizer stream(tokenizer);
  EXPECT_EQ(*stream.Push(ids[0]), "");
  EXPECT_EQ(stream.Push(-5).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*stream.Push(ids[1]), "");
  EXPECT_EQ(*stream.Push(ids[2]), "🫠");
}

}  // namespace
}  // namespace specd::text
