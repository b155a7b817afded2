#include "common/text/tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/paths.h"
#include "tests/unit/common/text/qwen3_tokenizer.h"

namespace specd::text {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct ReferenceCase {
  std::string text;
  std::vector<TokenId> ids;
  std::string decoded;
};

std::vector<ReferenceCase> LoadReferenceCases() {
  std::ifstream file(specd::testing::SharedDir() / "reference/tokenizer/qwen3_cases.json");
  const nlohmann::json cases = nlohmann::json::parse(file);
  std::vector<ReferenceCase> result;
  for (const nlohmann::json& entry : cases) {
    result.push_back({entry["text"], entry["ids"], entry["decoded"]});
  }
  return result;
}

TEST(TokenizerTest, EncodesEveryReferenceCaseToTheReferenceIds) {
  const std::vector<ReferenceCase> cases = LoadReferenceCases();
  ASSERT_FALSE(cases.empty());
  for (const ReferenceCase& reference : cases) {
    absl::StatusOr<std::vector<TokenId>> ids = Qwen3Tokenizer().Encode(reference.text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, reference.ids) << "text: " << reference.text;
  }
}

TEST(TokenizerTest, DecodesEveryReferenceCaseToTheReferenceText) {
  for (const ReferenceCase& reference : LoadReferenceCases()) {
    absl::StatusOr<std::string> text = Qwen3Tokenizer().Decode(reference.ids);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, reference.decoded);
  }
}

TEST(TokenizerTest, MatchesSpecialTokensInTheTextAsSingleIds) {
  const Tokenizer& tokenizer = Qwen3Tokenizer();
  const TokenId im_start = *tokenizer.TokenToId("<|im_start|>");
  const TokenId im_end = *tokenizer.TokenToId("<|im_end|>");
  EXPECT_EQ(im_start, 151644);
  EXPECT_EQ(im_end, 151645);
  EXPECT_THAT(*tokenizer.Encode("<|im_start|><|im_end|>"), ElementsAre(im_start, im_end));
}

TEST(TokenizerTest, SkipsOnlySpecialTokensWhenAskedTo) {
  const Tokenizer& tokenizer = Qwen3Tokenizer();
  const std::vector<TokenId> ids =
      *tokenizer.Encode("<|im_start|>user\n<think>hi</think><|im_end|>");
  EXPECT_EQ(*tokenizer.Decode(ids), "<|im_start|>user\n<think>hi</think><|im_end|>");
  // <think> is an added token but not a special one, as in Qwen's tokenizer.json.
  EXPECT_EQ(*tokenizer.Decode(ids, {.skip_special_tokens = true, .skip_unknown_ids = false}),
            "user\n<think>hi</think>");
}

TEST(TokenizerTest, LooksUpTokensAndIdsBothWays) {
  const Tokenizer& tokenizer = Qwen3Tokenizer();
  EXPECT_EQ(tokenizer.TokenToId("Hello"), 9707);
  EXPECT_EQ(tokenizer.IdToToken(9707), "Hello");
  EXPECT_EQ(tokenizer.IdToToken(151645), "<|im_end|>");
  EXPECT_EQ(tokenizer.TokenToId("no such token"), std::nullopt);
  EXPECT_EQ(tokenizer.IdToToken(-1), std::nullopt);
  EXPECT_EQ(tokenizer.IdToToken(tokenizer.vocab_size()), std::nullopt);
  EXPECT_TRUE(tokenizer.IsSpecial(151645));
  EXPECT_FALSE(tokenizer.IsSpecial(9707));
}

TEST(TokenizerTest, CountsBpeAndAddedTokensInItsVocabSize) {
  EXPECT_EQ(Qwen3Tokenizer().vocab_size(), 151643 + 26);
}

TEST(TokenizerTest, RejectsTextThatIsNotUtf8) {
  const absl::StatusOr<std::vector<TokenId>> ids = Qwen3Tokenizer().Encode("ok \xC3\x28");
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ids.status().message(), HasSubstr("byte 3"));
}

TEST(TokenizerTest, RejectsIdsOutsideTheVocabulary) {
  const std::vector<TokenId> ids = {9707, 151669};
  const absl::StatusOr<std::string> text = Qwen3Tokenizer().Decode(ids);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.status().message(), HasSubstr("151669"));
}

TEST(TokenizerTest, DecodesATokenThatEndsMidCharacterAsReplacementCharacter) {
  const Tokenizer& tokenizer = Qwen3Tokenizer();
  const std::vector<TokenId> ids = *tokenizer.Encode("🫠");
  ASSERT_EQ(ids.size(), 3u);  // the emoji's four bytes span three tokens
  EXPECT_EQ(*tokenizer.Decode(std::span(ids).first(1)), "\uFFFD");
}

TEST(TokenizerTest, NormalizesToNfcBeforeSplitting) {
  const Tokenizer& tokenizer = Qwen3Tokenizer();
  EXPECT_EQ(*tokenizer.Encode("cafe\u0301"), *tokenizer.Encode("caf\u00E9"));
}

TEST(TokenizerTest, SplitsAVeryLongPieceWithoutQuadraticBlowUp) {
  const Tokenizer& tokenizer = Qwen3Tokenizer();
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "\u4E2D\u6587";  // one 120 KB piece: no spaces
  const absl::StatusOr<std::vector<TokenId>> ids = tokenizer.Encode(text);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*tokenizer.Decode(*ids), text);
}

}  // namespace
}  // namespace specd::text
