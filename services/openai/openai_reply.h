#pragma once
// The OpenAI objects of one reply — a whole `text_completion` / `chat.completion`, or the chunks
// of its stream — built from the GenerationService's messages, and OpenAI's error object for a
// status. A stream's chunks carry running state (the completion text's offset for the legacy
// logprobs, the assistant role on the first chat delta), so one Reply serves one request.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "common/text/tokenizer.h"
#include "services/openai/openai_request.h"
#include "specd/v1/generation.pb.h"

namespace specd::openai {

class Reply {
 public:
  // `tokenizer` spells the tokens of logprobs ("token_id:N" without one) and must outlive it.
  Reply(Endpoint endpoint, const std::string& request_id, std::string model,
        const text::Tokenizer* tokenizer, bool include_usage);

  // "cmpl-…" or "chatcmpl-…": the id every object of the reply carries.
  const std::string& id() const { return id_; }

  // The whole response of a request that did not stream.
  nlohmann::json Whole(const v1::GenerateResponse& response);
  // The chunk of one stream message.
  nlohmann::json Chunk(const v1::GenerateStreamResponse& message);
  // With include_usage, the last chunk: no choices, the request's token counts.
  nlohmann::json UsageChunk() const;

 private:
  nlohmann::json Envelope(const char* object) const;
  nlohmann::json Logprobs(const google::protobuf::RepeatedPtrField<v1::TokenLogprob>& logprobs);
  std::string TokenText(uint32_t id) const;

  Endpoint endpoint_;
  std::string id_;
  std::string model_;
  int64_t created_;  // Unix seconds
  const text::Tokenizer* tokenizer_;
  bool include_usage_;
  bool first_chunk_ = true;
  int64_t text_offset_ = 0;  // characters of the completion so far
  v1::Usage usage_;          // as of the last message
};

// OpenAI's error object {"error": {"message", "type", "param", "code"}} for `status`.
nlohmann::json ErrorObject(const absl::Status& status);
// The HTTP status of an error: 400, 401, 404, 429, 503, … (500 for what has no better one).
int HttpStatusOf(const absl::Status& status);

// `value` as JSON text; bytes that are not UTF-8 (a token that ends mid-character) become U+FFFD.
std::string Serialize(const nlohmann::json& value);

}  // namespace specd::openai
