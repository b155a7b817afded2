// What Tokenizer::FromJson accepts from a tokenizer.json, and how it says no.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/text/tokenizer.h"
#include "tests/unit/common/text/tiny_tokenizer_json.h"

namespace specd::text {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<Tokenizer> Load(const nlohmann::json& json) {
  return Tokenizer::FromJson(json.dump());
}

std::string LoadError(const nlohmann::json& json) {
  const absl::StatusOr<Tokenizer> tokenizer = Load(json);
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(tokenizer.status().message());
}

TEST(TokenizerSpecTest, MergesByRankNotByPosition) {
  const Tokenizer tokenizer = *Load(TinyTokenizerJson());
  // "b c" outranks "a b", so "abc" becomes a + bc.
  EXPECT_THAT(*tokenizer.Encode("abc"), ElementsAre('a', 256));
  EXPECT_THAT(*tokenizer.Encode("ab"), ElementsAre(257));
}

TEST(TokenizerSpecTest, MergesTheLeftmostPairFirstAmongEquals) {
  const Tokenizer tokenizer = *Load(TinyTokenizerJson());
  EXPECT_THAT(*tokenizer.Encode("aaa"), ElementsAre(258, 'a'));
  EXPECT_THAT(*tokenizer.Encode("aaaa"), ElementsAre(258, 258));
}

TEST(TokenizerSpecTest, ReadsMergesWrittenAsStringsOrAsPairs) {
  nlohmann::json json = TinyTokenizerJson();
  json["model"]["merges"] = nlohmann::json::array({"b c", "a b", "a a"});
  EXPECT_THAT(*Load(json)->Encode("abc"), ElementsAre('a', 256));
}

TEST(TokenizerSpecTest, WritesBytesThroughTheByteLevelAlphabet) {
  const Tokenizer tokenizer = *Load(TinyTokenizerJson());
  EXPECT_THAT(*tokenizer.Encode(" \n"), ElementsAre(' ', '\n'));
  EXPECT_EQ(tokenizer.IdToToken(' '), "\u0120");   // Ġ
  EXPECT_EQ(tokenizer.IdToToken('\n'), "\u010A");  // Ċ
}

TEST(TokenizerSpecTest, MakesNormalizationOptional) {
  nlohmann::json json = TinyTokenizerJson();
  json["normalizer"] = nullptr;
  const Tokenizer tokenizer = *Load(json);
  EXPECT_EQ(tokenizer.Encode("e\u0301")->size(), 3u);  // e + the two bytes of U+0301
  EXPECT_EQ(Load(TinyTokenizerJson())->Encode("e\u0301")->size(), 2u);  // é
}

TEST(TokenizerSpecTest, MatchesNormalizedAddedTokensAfterNormalization) {
  nlohmann::json json = TinyTokenizerJson();
  json["added_tokens"].push_back({{"id", 302}, {"content", "caf\u00E9"}, {"normalized", true}});
  json["added_tokens"].push_back({{"id", 303}, {"content", "e\u0301!"}, {"normalized", false}});
  const Tokenizer tokenizer = *Load(json);
  EXPECT_THAT(*tokenizer.Encode("cafe\u0301<|end|>"), ElementsAre(302, 300));
  // A raw token matches the text as written, before NFC would have composed it.
  EXPECT_THAT(*tokenizer.Encode("e\u0301!"), ElementsAre(303));
}

TEST(TokenizerSpecTest, RejectsComponentsItDoesNotImplement) {
  nlohmann::json json = TinyTokenizerJson();
  json["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_THAT(LoadError(json), HasSubstr("normalizer"));

  json = TinyTokenizerJson();
  json["model"]["type"] = "WordPiece";
  EXPECT_THAT(LoadError(json), HasSubstr("model type \"WordPiece\""));

  json = TinyTokenizerJson();
  json["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
  EXPECT_THAT(LoadError(json), HasSubstr("Split behavior"));

  json = TinyTokenizerJson();
  json["pre_tokenizer"] = {{"type", "ByteLevel"}, {"use_regex", true}};
  EXPECT_THAT(LoadError(json), HasSubstr("pre_tokenizer"));

  json = TinyTokenizerJson();
  json["decoder"] = {{"type", "WordPiece"}};
  EXPECT_THAT(LoadError(json), HasSubstr("decoder"));

  json = TinyTokenizerJson();
  json["post_processor"] = {{"type", "TemplateProcessing"}};
  EXPECT_THAT(LoadError(json), HasSubstr("post_processor"));

  json = TinyTokenizerJson();
  json["model"]["byte_fallback"] = true;
  EXPECT_THAT(LoadError(json), HasSubstr("model.byte_fallback"));
}

TEST(TokenizerSpecTest, RejectsAFileThatContradictsItself) {
  EXPECT_THAT(Tokenizer::FromJson("{not json").status().message(), HasSubstr("not valid JSON"));

  nlohmann::json json = TinyTokenizerJson();
  json["model"]["vocab"]["ab"] = 256;
  EXPECT_THAT(LoadError(json), HasSubstr("ids must be 0..258, each once"));

  json = TinyTokenizerJson();
  json["model"]["merges"].push_back(nlohmann::json::array({"c", "c"}));
  EXPECT_THAT(LoadError(json), HasSubstr("not in the vocab"));

  json = TinyTokenizerJson();
  json["model"]["merges"].push_back("a b c");
  EXPECT_THAT(LoadError(json), HasSubstr("is not two tokens"));

  json = TinyTokenizerJson();
  json["model"]["vocab"].erase("\u0120");
  json["model"]["vocab"]["xyz"] = 32;
  EXPECT_THAT(LoadError(json), HasSubstr("no token for byte 32"));

  json = TinyTokenizerJson();
  json["added_tokens"].push_back({{"content", "<|x|>"}});
  EXPECT_THAT(LoadError(json), HasSubstr("lacks an id"));

  json = TinyTokenizerJson();
  json["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  EXPECT_THAT(LoadError(json), HasSubstr("does not compile"));
}

TEST(TokenizerSpecTest, LeavesIdsNoTokenNamesOutOfTheVocabulary) {
  const Tokenizer tokenizer = *Load(TinyTokenizerJson());
  EXPECT_EQ(tokenizer.vocab_size(), 302);
  EXPECT_EQ(tokenizer.IdToToken(299), std::nullopt);
  const std::vector<TokenId> hole = {299};
  EXPECT_FALSE(tokenizer.Decode(hole).ok());
}

}  // namespace
}  // namespace specd::text
