#include "common/text/streaming_detokenizer.h"

#include "common/text/utf8.h"

namespace specd::text {

absl::StatusOr<std::string> StreamingDetokenizer::Push(TokenId id) {
  if (absl::Status status = tokenizer_.AppendTokenBytes(id, options_, pending_); !status.ok()) {
    return status;
  }
  std::string text;
  pending_.erase(0, AppendCompleteUtf8Lossy(pending_, text));
  return text;
}

std::string StreamingDetokenizer::Flush() {
  std::string text;
  AppendUtf8Lossy(pending_, text);
  pending_.clear();
  return text;
}

}  // namespace specd::text
