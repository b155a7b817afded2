#include "common/text/regex_splitter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace specd::text {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> Pieces(std::string_view pattern, std::string_view text) {
  std::vector<std::string> pieces;
  const absl::Status status = RegexSplitter::Compile(pattern)->Split(
      text, [&](std::string_view piece) { pieces.emplace_back(piece); });
  EXPECT_TRUE(status.ok()) << status;
  return pieces;
}

TEST(RegexSplitterTest, KeepsBothMatchesAndTheTextBetweenThem) {
  EXPECT_THAT(Pieces(R"(\d+)", "ab12cd3"), ElementsAre("ab", "12", "cd", "3"));
}

TEST(RegexSplitterTest, SplitsNothingOnEmptyMatches) {
  EXPECT_THAT(Pieces(R"(x*)", "abxxc"), ElementsAre("ab", "xx", "c"));
}

TEST(RegexSplitterTest, UsesUnicodePropertiesAndCaseInsensitiveGroups) {
  EXPECT_THAT(Pieces(R"((?i:'s)|\p{L}+|\p{N})", "Café's 42"),
              ElementsAre("Café", "'s", " ", "4", "2"));
  EXPECT_THAT(Pieces(R"((?i:'s)|\p{L}+)", "IT'S"), ElementsAre("IT", "'S"));
}

// \s is Unicode White_Space, as in Oniguruma: U+0085 is a space, U+180E is not.
TEST(RegexSplitterTest, TreatsExactlyUnicodeWhiteSpaceAsSpace) {
  EXPECT_THAT(Pieces(R"(\s+)", "a\u0085\u3000b\u180Ec"),
              ElementsAre("a", "\u0085\u3000", "b\u180Ec"));
  EXPECT_THAT(Pieces(R"([^\s]+)", "a\u180E b"), ElementsAre("a\u180E", " ", "b"));
  EXPECT_THAT(Pieces(R"(\s+(?!\S))", "a   b"), ElementsAre("a", "  ", " b"));
}

TEST(RegexSplitterTest, ReportsAPatternThatDoesNotCompile) {
  const absl::StatusOr<RegexSplitter> splitter = RegexSplitter::Compile("(unclosed");
  EXPECT_EQ(splitter.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace specd::text
