#include "common/text/added_tokens.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdint>

#include "common/text/utf8.h"

namespace specd::text {
namespace {

// Unicode White_Space, which HF matches with the Rust regex `\s` when stripping.
bool IsWhiteSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// The Rust regex `\w` (Alphabetic, marks, decimal digits, connector punctuation, joiners),
// approximated by general category.
bool IsWordCharacter(char32_t c) {
  if (c == 0x200C || c == 0x200D) return true;
  switch (utf8proc_category(static_cast<int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

bool WordCharacterBefore(std::string_view text, size_t pos) {
  size_t start;
  return pos > 0 && IsWordCharacter(CodePointBefore(text, pos, &start));
}

bool WordCharacterAt(std::string_view text, size_t pos) {
  size_t length;
  return pos < text.size() && IsWordCharacter(CodePointAt(text, pos, &length));
}

// Where the whitespace that ends text[floor, end) begins.
size_t StartOfWhiteSpaceBefore(std::string_view text, size_t end, size_t floor) {
  while (end > floor) {
    size_t start;
    if (!IsWhiteSpace(CodePointBefore(text, end, &start))) break;
    end = start;
  }
  return std::max(end, floor);
}

// Where the whitespace that starts text[begin, ...) ends.
size_t EndOfWhiteSpaceAfter(std::string_view text, size_t begin) {
  while (begin < text.size()) {
    size_t length;
    if (!IsWhiteSpace(CodePointAt(text, begin, &length))) break;
    begin += length;
  }
  return begin;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<Entry> entries) {
  for (Entry& entry : entries) {
    if (!entry.pattern.empty()) entries_.push_back(std::move(entry));
  }
  for (int i = 0; i < static_cast<int>(entries_.size()); ++i) {
    const std::string& pattern = entries_[i].pattern;
    const auto first = static_cast<uint8_t>(pattern[0]);
    entries_by_first_byte_[first].push_back(i);
    for (int second = 0; second < 256; ++second) {
      if (pattern.size() == 1 || static_cast<uint8_t>(pattern[1]) == second) {
        two_byte_prefixes_.set(first << 8 | second);
      }
    }
  }
  for (std::vector<int>& candidates : entries_by_first_byte_) {
    std::stable_sort(candidates.begin(), candidates.end(), [this](int a, int b) {
      return entries_[a].pattern.size() > entries_[b].pattern.size();
    });
  }
}

const AddedTokenMatcher::Entry* AddedTokenMatcher::LongestMatchAt(std::string_view text,
                                                                  size_t pos) const {
  if (pos + 1 < text.size() && !two_byte_prefixes_.test(static_cast<uint8_t>(text[pos]) << 8 |
                                                        static_cast<uint8_t>(text[pos + 1]))) {
    return nullptr;
  }
  for (int index : entries_by_first_byte_[static_cast<uint8_t>(text[pos])]) {
    const Entry& entry = entries_[index];
    if (text.substr(pos).starts_with(entry.pattern)) return &entry;
  }
  return nullptr;
}

void AddedTokenMatcher::Split(
    std::string_view text,
    absl::FunctionRef<void(std::string_view, std::optional<TokenId>)> segment) const {
  size_t plain_start = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    if (entries_by_first_byte_[static_cast<uint8_t>(text[pos])].empty()) {
      ++pos;
      continue;
    }
    const Entry* entry = LongestMatchAt(text, pos);
    if (entry == nullptr) {
      ++pos;
      continue;
    }
    const size_t match_end = pos + entry->pattern.size();
    const AddedToken& token = entry->token;
    // A rejected single-word match still consumes its span, as in HF's non-overlapping scan.
    if (token.single_word && (WordCharacterBefore(text, pos) || WordCharacterAt(text, match_end))) {
      pos = match_end;
      continue;
    }
    const size_t start = token.lstrip ? StartOfWhiteSpaceBefore(text, pos, plain_start) : pos;
    const size_t end = token.rstrip ? EndOfWhiteSpaceAfter(text, match_end) : match_end;
    if (start > plain_start) segment(text.substr(plain_start, start - plain_start), std::nullopt);
    segment(text.substr(start, end - start), token.id);
    plain_start = pos = end;
  }
  if (plain_start < text.size()) segment(text.substr(plain_start), std::nullopt);
}

}  // namespace specd::text
