#pragma once
// Every token the tokenizer knows, BPE tokens and added tokens alike: id <-> token text, the
// bytes each id decodes to, and which ids are special.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/text/added_tokens.h"
#include "common/text/token_id.h"

namespace specd::text {

class Vocabulary {
 public:
  // `model_tokens[id]` is the BPE token with that id. Added tokens may reuse a BPE id (their
  // content then wins, as in HF) or extend the id space; ids nothing names are holes.
  static absl::StatusOr<Vocabulary> Create(std::vector<std::string> model_tokens,
                                           const std::vector<AddedToken>& added_tokens);

  // One past the highest id.
  TokenId size() const { return static_cast<TokenId>(tokens_.size()); }
  bool Contains(TokenId id) const { return id >= 0 && id < size() && assigned_[id]; }

  std::optional<TokenId> Find(std::string_view token) const;
  // The token text of a contained id.
  std::string_view Token(TokenId id) const { return tokens_[id]; }
  // The bytes a contained id stands for in decoded text, which may end mid-character: the
  // ByteLevel reading of the token, or its text verbatim when it is not ByteLevel text.
  std::string_view Bytes(TokenId id) const { return bytes_[id]; }
  bool IsSpecial(TokenId id) const { return special_[id]; }

 private:
  Vocabulary() = default;

  std::vector<std::string> tokens_;
  std::vector<std::string> bytes_;
  std::vector<bool> assigned_;
  std::vector<bool> special_;
  // Keys view `tokens_`, whose strings stay in place when the vector moves.
  absl::flat_hash_map<std::string_view, TokenId> ids_;
};

}  // namespace specd::text
