#pragma once
// What a tokenizer.json of the Qwen2/Qwen3/Qwen3.5 family says, checked and flattened: the
// pipeline NFC -> Split(regex, Isolated) -> ByteLevel -> BPE, decoded by ByteLevel. Any other
// component, or an option this pipeline does not implement, is rejected by name.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/text/added_tokens.h"

namespace specd::text {

struct TokenizerSpec {
  bool nfc = false;                                         // normalizer: NFC, or none
  std::string split_pattern;                                // the Split pre-tokenizer's regex
  std::vector<std::string> vocab;                           // BPE tokens by id, in ByteLevel text
  std::vector<std::pair<std::string, std::string>> merges;  // by rank
  std::vector<AddedToken> added_tokens;
};

absl::StatusOr<TokenizerSpec> ParseTokenizerJson(std::string_view json);

}  // namespace specd::text
