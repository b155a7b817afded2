#include "common/text/byte_level.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace specd::text {
namespace {

TEST(ByteLevelTest, GivesEveryByteItsOwnPrintableCharacter) {
  std::set<std::string_view> characters;
  for (int byte = 0; byte < 256; ++byte)
    characters.insert(ByteLevelChar(static_cast<uint8_t>(byte)));
  EXPECT_EQ(characters.size(), 256u);
  EXPECT_EQ(ByteLevelChar('a'), "a");
  EXPECT_EQ(ByteLevelChar(0xE9), "\u00E9");
  EXPECT_EQ(ByteLevelChar(0x00), "\u0100");
  EXPECT_EQ(ByteLevelChar(' '), "\u0120");   // Ġ
  EXPECT_EQ(ByteLevelChar('\n'), "\u010A");  // Ċ
  EXPECT_EQ(ByteLevelChar(0xAD), "\u0143");  // the last byte that is not printable
}

TEST(ByteLevelTest, DecodesTokensBackToBytes) {
  std::string token;
  std::string bytes;
  for (int byte = 0; byte < 256; ++byte) {
    token += ByteLevelChar(static_cast<uint8_t>(byte));
    bytes += static_cast<char>(byte);
  }
  EXPECT_EQ(ByteLevelDecode(token), bytes);
  EXPECT_EQ(ByteLevelDecode("\u0120hello\u010A"), " hello\n");
}

TEST(ByteLevelTest, RefusesTokensOutsideTheAlphabet) {
  EXPECT_EQ(ByteLevelDecode("has space"), std::nullopt);
  EXPECT_EQ(ByteLevelDecode("\u4E2D"), std::nullopt);
}

}  // namespace
}  // namespace specd::text
