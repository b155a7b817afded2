#include "common/text/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace specd::text {
namespace {

std::string Lossy(std::string_view bytes) {
  std::string out;
  AppendUtf8Lossy(bytes, out);
  return out;
}

TEST(Utf8Test, FindsTheFirstInvalidSequence) {
  EXPECT_EQ(FindInvalidUtf8("plain ascii"), std::string_view::npos);
  EXPECT_EQ(FindInvalidUtf8("caf\u00E9 \U0001F600"), std::string_view::npos);
  EXPECT_EQ(FindInvalidUtf8("ab\x80"), 2u);             // stray continuation byte
  EXPECT_EQ(FindInvalidUtf8("a\xC0\xAF"), 1u);          // overlong '/'
  EXPECT_EQ(FindInvalidUtf8("a\xED\xA0\x80"), 1u);      // surrogate U+D800
  EXPECT_EQ(FindInvalidUtf8("a\xF4\x90\x80\x80"), 1u);  // past U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("ok\xE4\xB8"), 2u);         // truncated
}

TEST(Utf8Test, ReplacesEachMaximalInvalidSubsequenceWithOneReplacementCharacter) {
  EXPECT_EQ(Lossy("a\x80z"), "a\uFFFDz");
  EXPECT_EQ(Lossy("a\xE4\xB8z"), "a\uFFFDz");  // a truncated sequence is one subpart
  EXPECT_EQ(Lossy("\xF0\x9F\x98"), "\uFFFD");
  EXPECT_EQ(Lossy("\xC0\xAF"), "\uFFFD\uFFFD");  // C0 is never valid
  EXPECT_EQ(Lossy("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(Lossy("\xE4\xB8\xAD"), "\u4E2D");
}

TEST(Utf8Test, HoldsBackOnlyATailThatCanStillBecomeValid) {
  std::string out;
  EXPECT_EQ(AppendCompleteUtf8Lossy("ab\xF0\x9F\x98", out), 2u);
  EXPECT_EQ(out, "ab");
  out.clear();
  EXPECT_EQ(AppendCompleteUtf8Lossy("ab\xF0\x28", out), 4u);  // cannot become valid
  EXPECT_EQ(out, "ab\uFFFD(");
}

}  // namespace
}  // namespace specd::text
