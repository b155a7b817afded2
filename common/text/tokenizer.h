#pragma once
// The Qwen-family byte-level BPE tokenizer, built from a Hugging Face tokenizer.json:
//   encode: added tokens are cut out of the raw text first; the rest is NFC-normalized, split by
//           the pre-tokenizer regex, and each piece's bytes are BPE-merged into ids.
//   decode: each id's bytes, concatenated and read as UTF-8 (invalid sequences become U+FFFD).
// Encoding never adds BOS/EOS. A Tokenizer is immutable, so one instance serves all threads.
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/text/added_tokens.h"
#include "common/text/bpe_model.h"
#include "common/text/regex_splitter.h"
#include "common/text/token_id.h"
#include "common/text/tokenizer_spec.h"
#include "common/text/vocabulary.h"

namespace specd::text {

struct DecodeOptions {
  bool skip_special_tokens = false;  // drop added tokens marked special (<|im_end|>, ...)
  // Decode an id the tokenizer lacks to nothing, as transformers does, instead of failing: a
  // model has more embedding rows than its tokenizer has tokens (Qwen3: 151,936 against
  // 151,669), and may sample one. A negative id fails all the same.
  bool skip_unknown_ids = false;
};

class Tokenizer {
 public:
  static absl::StatusOr<Tokenizer> FromFile(const std::filesystem::path& path);
  // The tokenizer.json to use with the checkpoint in `model_dir`: `given` when it is set, else
  // the checkpoint's own when it has one; nullopt otherwise.
  static std::optional<std::filesystem::path> FileFor(const std::filesystem::path& model_dir,
                                                      const std::filesystem::path& given = {});
  static absl::StatusOr<Tokenizer> FromJson(std::string_view json);

  // Fails on text that is not valid UTF-8.
  absl::StatusOr<std::vector<TokenId>> Encode(std::string_view text) const;

  // Fails on an id that names no token.
  absl::StatusOr<std::string> Decode(std::span<const TokenId> ids,
                                     const DecodeOptions& options = {}) const;

  // Appends the bytes `id` stands for, which may end mid-character (for streaming), or nothing
  // for a special token that `options` skips. Fails on an id that names no token, appending
  // nothing.
  absl::Status AppendTokenBytes(TokenId id, const DecodeOptions& options, std::string& bytes) const;

  // Looks up BPE and added tokens alike, e.g. TokenToId("<|im_end|>").
  std::optional<TokenId> TokenToId(std::string_view token) const;
  std::optional<std::string_view> IdToToken(TokenId id) const;
  bool IsSpecial(TokenId id) const { return vocabulary_.Contains(id) && vocabulary_.IsSpecial(id); }

  // One past the highest id (BPE tokens plus added tokens; the model's embedding may be larger).
  TokenId vocab_size() const { return vocabulary_.size(); }

 private:
  static absl::StatusOr<Tokenizer> FromSpec(TokenizerSpec spec);

  Tokenizer(bool nfc, Vocabulary vocabulary, BpeModel model, RegexSplitter pre_tokenizer,
            AddedTokenMatcher raw_added_tokens, AddedTokenMatcher normalized_added_tokens);

  // Encodes text free of raw-matched added tokens.
  absl::Status EncodeSegment(std::string_view segment, BpeModel::Workspace& workspace,
                             std::vector<TokenId>& ids) const;

  bool nfc_;
  Vocabulary vocabulary_;
  BpeModel model_;
  RegexSplitter pre_tokenizer_;
  AddedTokenMatcher raw_added_tokens_;         // tokens with normalized = false
  AddedTokenMatcher normalized_added_tokens_;  // tokens with normalized = true
};

}  // namespace specd::text
