#pragma once
// GPT-2's ByteLevel alphabet, which Qwen's BPE vocabulary is written in: each byte stands for
// one printable code point, so every token is a valid string. Printable Latin-1 bytes stand for
// themselves; the other 68 (controls, space, 0x7F-0xA0, 0xAD) map in order to U+0100 onwards.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace specd::text {

// The UTF-8 encoding of the code point that stands for `byte`.
std::string_view ByteLevelChar(uint8_t byte);

// The bytes a ByteLevel token stands for, or nullopt when it holds a character outside the
// alphabet (such a token is not byte-level text, e.g. an added token containing a space).
std::optional<std::string> ByteLevelDecode(std::string_view token);

}  // namespace specd::text
