#include "common/text/utf8.h"

#include <cstdint>

namespace specd::text {
namespace {

enum class SequenceKind { kValid, kInvalid, kTruncated };

struct Sequence {
  SequenceKind kind;
  size_t length;  // bytes of the character, or of the maximal invalid subpart (at least 1)
  char32_t code_point;
};

// Decodes the sequence at the front of `bytes` (non-empty) by the well-formed byte ranges of
// Unicode Table 3-7, which excludes overlong forms, surrogates and code points past U+10FFFF.
Sequence DecodeSequence(std::string_view bytes) {
  const auto lead = static_cast<uint8_t>(bytes[0]);
  if (lead < 0x80) return {SequenceKind::kValid, 1, lead};
  size_t continuation_bytes;
  char32_t code_point;
  uint8_t low = 0x80;
  uint8_t high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    continuation_bytes = 1;
    code_point = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    continuation_bytes = 2;
    code_point = lead & 0x0F;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    continuation_bytes = 3;
    code_point = lead & 0x07;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return {SequenceKind::kInvalid, 1, 0};
  }
  for (size_t i = 1; i <= continuation_bytes; ++i) {
    if (i == bytes.size()) return {SequenceKind::kTruncated, i, 0};
    const auto byte = static_cast<uint8_t>(bytes[i]);
    if (byte < low || byte > high) return {SequenceKind::kInvalid, i, 0};
    code_point = (code_point << 6) | (byte & 0x3F);
    low = 0x80;
    high = 0xBF;
  }
  return {SequenceKind::kValid, continuation_bytes + 1, code_point};
}

constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";

size_t AppendLossy(std::string_view bytes, std::string& out, bool hold_truncated_tail) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t ascii_end = pos;
    while (ascii_end < bytes.size() && static_cast<uint8_t>(bytes[ascii_end]) < 0x80) ++ascii_end;
    out.append(bytes.substr(pos, ascii_end - pos));
    pos = ascii_end;
    if (pos == bytes.size()) break;
    const Sequence sequence = DecodeSequence(bytes.substr(pos));
    if (sequence.kind == SequenceKind::kTruncated && hold_truncated_tail) return pos;
    if (sequence.kind == SequenceKind::kValid) {
      out.append(bytes.substr(pos, sequence.length));
    } else {
      out.append(kReplacementCharacter);
    }
    pos += sequence.length;
  }
  return pos;
}

}  // namespace

size_t FindInvalidUtf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Sequence sequence = DecodeSequence(text.substr(pos));
    if (sequence.kind != SequenceKind::kValid) return pos;
    pos += sequence.length;
  }
  return std::string_view::npos;
}

void AppendUtf8Lossy(std::string_view bytes, std::string& out) {
  AppendLossy(bytes, out, /*hold_truncated_tail=*/false);
}

size_t AppendCompleteUtf8Lossy(std::string_view bytes, std::string& out) {
  return AppendLossy(bytes, out, /*hold_truncated_tail=*/true);
}

char32_t CodePointAt(std::string_view text, size_t pos, size_t* length) {
  const Sequence sequence = DecodeSequence(text.substr(pos));
  *length = sequence.length;
  return sequence.code_point;
}

char32_t CodePointBefore(std::string_view text, size_t end, size_t* start) {
  size_t pos = end - 1;
  while (pos > 0 && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) --pos;
  *start = pos;
  size_t length;
  return CodePointAt(text, pos, &length);
}

}  // namespace specd::text
