#pragma once
// Turns generated ids into text as they arrive. A byte-level token can end in the middle of a
// UTF-8 character (an emoji often spans two or three tokens), so the bytes of an unfinished
// character are held back until the tokens that complete it arrive. The pieces concatenate to
// exactly what Tokenizer::Decode returns for all the ids.
#include <string>

#include "absl/status/statusor.h"
#include "common/text/tokenizer.h"

namespace specd::text {

class StreamingDetokenizer {
 public:
  // `tokenizer` must outlive this object.
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, DecodeOptions options = {})
      : tokenizer_(tokenizer), options_(options) {}

  // The text that `id` completes; empty while a character is still unfinished. Fails on an id
  // that names no token, leaving the state as it was.
  absl::StatusOr<std::string> Push(TokenId id);

  // The text still held back, at the end of the stream: an unfinished character can no longer
  // complete, so it becomes U+FFFD.
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  DecodeOptions options_;
  std::string pending_;  // bytes of an unfinished character (at most 3)
};

}  // namespace specd::text
