#include "common/text/nfc.h"

#include <utf8proc.h>

#include <bitset>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "common/text/utf8.h"

namespace specd::text {
namespace {

// True when NFC maps `code_point` on its own to something else (U+212B ANGSTROM SIGN ->
// U+00C5): singletons and composition exclusions.
bool NfcChangesAlone(char32_t code_point) {
  utf8proc_int32_t buffer[8];
  int last_boundary_class = 0;
  const utf8proc_ssize_t length =
      utf8proc_decompose_char(static_cast<utf8proc_int32_t>(code_point), buffer, 8,
                              UTF8PROC_DECOMPOSE, &last_boundary_class);
  if (length <= 0 || length > 8) return true;
  const utf8proc_ssize_t composed = utf8proc_normalize_utf32(
      buffer, length, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  return composed != 1 || buffer[0] != static_cast<utf8proc_int32_t>(code_point);
}

// True when `code_point` could make NFC differ from its input: NFC changes it on its own, it
// reorders (non-zero combining class), or it can be the second half of a composition. Those
// second halves are all marks except the Hangul vowel and trailing consonant jamo, which compose
// algorithmically with a preceding syllable or leading jamo.
bool ComputeMayChangeUnderNfc(char32_t code_point) {
  if ((code_point >= 0x1161 && code_point <= 0x1175) ||
      (code_point >= 0x11A8 && code_point <= 0x11C2)) {
    return true;
  }
  const utf8proc_property_t* property = utf8proc_get_property(static_cast<int32_t>(code_point));
  const bool decomposes_canonically =
      property->decomp_seqindex != UINT16_MAX && property->decomp_type == 0;
  const bool is_mark = property->category == UTF8PROC_CATEGORY_MN ||
                       property->category == UTF8PROC_CATEGORY_MC ||
                       property->category == UTF8PROC_CATEGORY_ME;
  return property->combining_class != 0 || is_mark ||
         (decomposes_canonically && NfcChangesAlone(code_point));
}

// ComputeMayChangeUnderNfc for every code point, tabulated once (136 KiB).
bool MayChangeUnderNfc(char32_t code_point) {
  static const std::bitset<0x110000>* const table = [] {
    auto* built = new std::bitset<0x110000>;
    for (char32_t c = 0x80; c < 0x110000; ++c) built->set(c, ComputeMayChangeUnderNfc(c));
    return built;
  }();
  return table->test(code_point);
}

// The offset of the first character at or after `pos` that may change under NFC, or npos.
size_t FindUnstable(std::string_view text, size_t pos) {
  while (pos < text.size()) {
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    size_t length;
    if (MayChangeUnderNfc(CodePointAt(text, pos, &length))) return pos;
    pos += length;
  }
  return std::string_view::npos;
}

// The offset of the first stable character at or after `pos`, or the end of `text`.
size_t FindStable(std::string_view text, size_t pos) {
  while (pos < text.size()) {
    size_t length;
    if (!MayChangeUnderNfc(CodePointAt(text, pos, &length))) return pos;
    pos += length;
  }
  return text.size();
}

void AppendNfc(std::string_view text, std::string& out) {
  utf8proc_uint8_t* normalized = nullptr;
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &normalized,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(normalized, &std::free);
  // utf8proc fails only on invalid UTF-8 or out of memory; callers pass valid text, so an error
  // here keeps the text as it came rather than dropping it.
  if (length < 0) {
    out.append(text);
  } else {
    out.append(reinterpret_cast<const char*>(normalized), static_cast<size_t>(length));
  }
}

}  // namespace

// A stable character never interacts with what precedes it, so NFC works on each run that
// starts at a stable character independently; only runs holding unstable characters (a stable
// starter followed by marks, say) go through utf8proc.
std::string_view ToNfc(std::string_view text, std::string& storage) {
  size_t unstable = FindUnstable(text, 0);
  if (unstable == std::string_view::npos) return text;
  storage.clear();
  size_t copied = 0;
  while (unstable != std::string_view::npos) {
    size_t run_start = unstable;
    if (unstable > copied) CodePointBefore(text, unstable, &run_start);
    const size_t run_end = FindStable(text, unstable);
    storage.append(text.substr(copied, run_start - copied));
    AppendNfc(text.substr(run_start, run_end - run_start), storage);
    copied = run_end;
    unstable = FindUnstable(text, run_end);
  }
  storage.append(text.substr(copied));
  return storage;
}

}  // namespace specd::text
