#include "common/text/byte_level.h"

#include <array>

#include "common/text/utf8.h"

namespace specd::text {
namespace {

constexpr char32_t kFirstShiftedCodePoint = 0x100;
constexpr int kShiftedBytes = 68;

constexpr bool StandsForItself(int byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE);
}

struct Alphabet {
  std::array<std::string, 256> char_of_byte;
  // Indexed by code point; -1 for code points outside the alphabet.
  std::array<int16_t, kFirstShiftedCodePoint + kShiftedBytes> byte_of_code_point;
};

void AppendUtf8(char32_t code_point, std::string& out) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else {  // the alphabet stays below U+0800
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

const Alphabet& GetAlphabet() {
  static const Alphabet* const alphabet = [] {
    auto* built = new Alphabet;
    built->byte_of_code_point.fill(-1);
    char32_t next_shifted = kFirstShiftedCodePoint;
    for (int byte = 0; byte < 256; ++byte) {
      const char32_t code_point = StandsForItself(byte) ? byte : next_shifted++;
      AppendUtf8(code_point, built->char_of_byte[byte]);
      built->byte_of_code_point[code_point] = static_cast<int16_t>(byte);
    }
    return built;
  }();
  return *alphabet;
}

}  // namespace

std::string_view ByteLevelChar(uint8_t byte) { return GetAlphabet().char_of_byte[byte]; }

std::optional<std::string> ByteLevelDecode(std::string_view token) {
  const Alphabet& alphabet = GetAlphabet();
  std::string bytes;
  bytes.reserve(token.size());
  size_t pos = 0;
  while (pos < token.size()) {
    size_t length;
    const char32_t code_point = CodePointAt(token, pos, &length);
    if (code_point >= alphabet.byte_of_code_point.size()) return std::nullopt;
    const int16_t byte = alphabet.byte_of_code_point[code_point];
    if (byte < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(byte));
    pos += length;
  }
  return bytes;
}

}  // namespace specd::text
