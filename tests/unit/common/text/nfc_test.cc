#include "common/text/nfc.h"

#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>
#include <memory>
#include <string>

namespace specd::text {
namespace {

std::string Utf8(char32_t code_point) {
  std::string out(4, '\0');
  const auto length = utf8proc_encode_char(static_cast<utf8proc_int32_t>(code_point),
                                           reinterpret_cast<utf8proc_uint8_t*>(out.data()));
  out.resize(static_cast<size_t>(length));
  return out;
}

std::string ReferenceNfc(const std::string& text) {
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> normalized(
      utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(text.c_str())), &std::free);
  return reinterpret_cast<const char*>(normalized.get());
}

TEST(NfcTest, ReturnsTextThatIsAlreadyNfcWithoutCopying) {
  const std::string text =
      "ASCII, caf\u00E9, \u4E2D\u6587, \uD55C\uAD6D\uC5B4, \U0001F468\u200D\U0001F469";
  std::string storage;
  EXPECT_EQ(ToNfc(text, storage).data(), text.data());
}

TEST(NfcTest, ComposesAndReordersOnlyWhereNeeded) {
  std::string storage;
  EXPECT_EQ(ToNfc("cafe\u0301 and more", storage), "caf\u00E9 and more");
  EXPECT_EQ(ToNfc("a\u0323\u0302", storage), ReferenceNfc("a\u0323\u0302"));
  EXPECT_EQ(ToNfc("\u212B", storage), "\u00C5");              // Angstrom sign decomposes
  EXPECT_EQ(ToNfc("\u1100\u1161\u11A8", storage), "\uAC01");  // Hangul jamo compose
  EXPECT_EQ(ToNfc("x\uAC00\u11A8y", storage), "x\uAC01y");
}

// The fast path skips characters it considers stable. Check that claim for every code point,
// after starters that compose with many second halves.
TEST(NfcTest, AgreesWithUtf8procForEveryCodePointInContext) {
  std::string storage;
  for (char32_t code_point = 1; code_point < 0x110000; ++code_point) {
    if (code_point >= 0xD800 && code_point < 0xE000) continue;
    // utf8proc 2.8 wrongly drops U+11A7 (a vowel, not a trailing consonant) after a syllable.
    if (code_point == 0x11A7) continue;
    for (const char* before : {"a", "e", "\u1100", "\uAC00", "\u0B47"}) {
      const std::string text = before + Utf8(code_point) + "z";
      ASSERT_EQ(ToNfc(text, storage), ReferenceNfc(text))
          << "U+" << std::hex << static_cast<uint32_t>(code_point);
    }
  }
}

}  // namespace
}  // namespace specd::text
