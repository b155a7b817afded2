#pragma once
// Added tokens (<|im_start|>, <think>, ...) are found in the text before BPE sees it, the way
// HF tokenizers' AddedVocabulary does: leftmost-longest match, honoring each token's flags.
#include <array>
#include <bitset>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "common/text/token_id.h"

namespace specd::text {

// One entry of tokenizer.json's "added_tokens".
struct AddedToken {
  TokenId id = 0;
  std::string content;
  bool single_word = false;  // match only where no word character touches either end
  bool lstrip = false;       // the match swallows whitespace on its left
  bool rstrip = false;       // the match swallows whitespace on its right
  bool normalized = false;   // match against normalized text instead of the raw input
  bool special = false;      // dropped by decoding with skip_special_tokens
};

class AddedTokenMatcher {
 public:
  struct Entry {
    // The text to find: the token's content, normalized for a token that matches normalized
    // text.
    std::string pattern;
    AddedToken token;
  };

  // Entries with an empty pattern never match.
  explicit AddedTokenMatcher(std::vector<Entry> entries);

  // Calls `segment` for each piece of `text` in order: an added token's span with its id, or
  // the plain text between added tokens with nullopt. Empty plain text is skipped.
  void Split(std::string_view text,
             absl::FunctionRef<void(std::string_view, std::optional<TokenId>)> segment) const;

 private:
  // The longest entry matching at `pos`, or nullptr.
  const Entry* LongestMatchAt(std::string_view text, size_t pos) const;

  std::vector<Entry> entries_;
  // For each first byte, the entries starting with it, longest pattern first.
  std::array<std::vector<int>, 256> entries_by_first_byte_;
  // The first two bytes of every pattern (any second byte for one-byte patterns): a quick
  // rejection for the many places where a pattern's first byte occurs in ordinary text.
  std::bitset<1 << 16> two_byte_prefixes_;
};

}  // namespace specd::text
