#include "common/text/regex_splitter.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace specd::text {
namespace {

std::string Pcre2ErrorMessage(int error_code) {
  std::array<PCRE2_UCHAR, 256> buffer;
  pcre2_get_error_message(error_code, buffer.data(), buffer.size());
  return reinterpret_cast<const char*>(buffer.data());
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};

// Unicode White_Space, which is what \s means in Oniguruma, the regex engine of HF tokenizers.
// PCRE2's \s also matches U+180E (a space before Unicode 6.3), so the pattern spells it out.
constexpr char kWhiteSpaceRanges[] =
    R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// `pattern` with every \s and \S replaced by the explicit White_Space class.
absl::StatusOr<std::string> SpellOutWhiteSpace(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char escaped = pattern[++i];
      if (escaped == 's') {
        absl::StrAppend(&out, in_class ? "" : "[", kWhiteSpaceRanges, in_class ? "" : "]");
      } else if (escaped == 'S' && !in_class) {
        absl::StrAppend(&out, "[^", kWhiteSpaceRanges, "]");
      } else if (escaped == 'S') {
        return absl::InvalidArgumentError("pre-tokenizer regex has \\S inside a character class");
      } else {
        out += c;
        out += escaped;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' right after the opening bracket (or its '^') is a literal member.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

size_t Utf8CharLength(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

}  // namespace

void RegexSplitter::CodeDeleter::operator()(pcre2_code* code) const { pcre2_code_free(code); }

absl::StatusOr<RegexSplitter> RegexSplitter::Compile(std::string_view pattern) {
  absl::StatusOr<std::string> pcre2_pattern = SpellOutWhiteSpace(pattern);
  if (!pcre2_pattern.ok()) return pcre2_pattern.status();
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre2_pattern->data()), pcre2_pattern->size(),
                    PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("pre-tokenizer regex \"", std::string(pattern),
                     "\" does not compile: ", Pcre2ErrorMessage(error_code)));
  }
  // Without JIT support (some platforms) pcre2_match interprets the pattern: slower, same result.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return RegexSplitter(code);
}

absl::Status RegexSplitter::Split(std::string_view text,
                                  absl::FunctionRef<void(std::string_view)> piece) const {
  const std::unique_ptr<pcre2_match_data, MatchDataDeleter> match_data(
      pcre2_match_data_create_from_pattern(code_.get(), nullptr));
  if (match_data == nullptr) return absl::ResourceExhaustedError("out of memory for regex match");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data.get());
  size_t gap_start = 0;  // text since the last match that no match has covered yet
  size_t search_from = 0;
  while (search_from < text.size()) {
    // The text was validated once by the caller, so PCRE2 skips its per-call UTF check.
    const int result = pcre2_match(code_.get(), subject, text.size(), search_from,
                                   PCRE2_NO_UTF_CHECK, match_data.get(), nullptr);
    if (result == PCRE2_ERROR_NOMATCH) break;
    if (result < 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("pre-tokenizer regex failed: ", Pcre2ErrorMessage(result)));
    }
    const size_t match_start = ovector[0];
    const size_t match_end = ovector[1];
    if (match_end == match_start) {  // an empty match splits nothing; step over one character
      if (match_start == text.size()) break;
      search_from = match_start + Utf8CharLength(static_cast<uint8_t>(text[match_start]));
      continue;
    }
    if (match_start > gap_start) piece(text.substr(gap_start, match_start - gap_start));
    piece(text.substr(match_start, match_end - match_start));
    gap_start = search_from = match_end;
  }
  if (gap_start < text.size()) piece(text.substr(gap_start));
  return absl::OkStatus();
}

}  // namespace specd::text
