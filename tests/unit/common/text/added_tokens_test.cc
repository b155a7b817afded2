#include "common/text/added_tokens.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace specd::text {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

// Splits `text` and lists (segment, id or -1 for plain text).
std::vector<std::pair<std::string, TokenId>> Segments(const std::vector<AddedToken>& tokens,
                                                      std::string_view text) {
  std::vector<AddedTokenMatcher::Entry> entries;
  for (const AddedToken& token : tokens) entries.push_back({token.content, token});
  std::vector<std::pair<std::string, TokenId>> segments;
  AddedTokenMatcher(std::move(entries))
      .Split(text, [&](std::string_view segment, std::optional<TokenId> id) {
        segments.emplace_back(std::string(segment), id.value_or(-1));
      });
  return segments;
}

TEST(AddedTokenMatcherTest, CutsTokensOutOfPlainText) {
  EXPECT_THAT(Segments({{.id = 1, .content = "<|end|>"}}, "a<|end|>b<|end|><|end|>"),
              ElementsAre(Pair("a", -1), Pair("<|end|>", 1), Pair("b", -1), Pair("<|end|>", 1),
                          Pair("<|end|>", 1)));
}

TEST(AddedTokenMatcherTest, PrefersTheLongestTokenAtTheLeftmostPosition) {
  const std::vector<AddedToken> tokens = {
      {.id = 1, .content = "<a>"}, {.id = 2, .content = "<a><b>"}, {.id = 3, .content = "a><b"}};
  EXPECT_THAT(Segments(tokens, "<a><b>!"), ElementsAre(Pair("<a><b>", 2), Pair("!", -1)));
  EXPECT_THAT(Segments(tokens, "<a><c>"), ElementsAre(Pair("<a>", 1), Pair("<c>", -1)));
}

TEST(AddedTokenMatcherTest, MatchesASingleWordTokenOnlyWhereNoWordCharacterTouchesIt) {
  const std::vector<AddedToken> tokens = {{.id = 1, .content = "<m>", .single_word = true}};
  EXPECT_THAT(
      Segments(tokens, "<m> x <m>, y<m> <m>z é<m>"),
      ElementsAre(Pair("<m>", 1), Pair(" x ", -1), Pair("<m>", 1), Pair(", y<m> <m>z é<m>", -1)));
}

TEST(AddedTokenMatcherTest, SwallowsWhiteSpaceOnTheSidesItStrips) {
  const std::vector<AddedToken> tokens = {{.id = 1, .content = "<l>", .lstrip = true},
                                          {.id = 2, .content = "<r>", .rstrip = true}};
  EXPECT_THAT(Segments(tokens, "a \t<l> b"),
              ElementsAre(Pair("a", -1), Pair(" \t<l>", 1), Pair(" b", -1)));
  EXPECT_THAT(Segments(tokens, "a <r>\u3000\n b"),
              ElementsAre(Pair("a ", -1), Pair("<r>\u3000\n ", 2), Pair("b", -1)));
  // Stripping never reaches back into the previous token.
  EXPECT_THAT(Segments(tokens, "<r> <l>"), ElementsAre(Pair("<r> ", 2), Pair("<l>", 1)));
}

TEST(AddedTokenMatcherTest, IgnoresEntriesWithoutAPattern) {
  std::vector<std::string> segments;
  AddedTokenMatcher({{"", {.id = 1, .content = "<x>"}}})
      .Split("a<x>", [&](std::string_view segment, auto) { segments.emplace_back(segment); });
  EXPECT_THAT(segments, ElementsAre("a<x>"));
}

}  // namespace
}  // namespace specd::text
