#include "services/openai/openai_reply.h"

#include <ctime>
#include <utility>

#include "absl/strings/str_cat.h"
#include "services/orchestrator/generation_handler.h"

namespace specd::openai {
namespace {

using nlohmann::json;

json FinishReason(v1::FinishReason reason) {
  const char* name = orchestrator::FinishReasonName(reason);
  return name == nullptr ? json(nullptr) : json(name);
}

// What matched a stop, as vLLM reports it beside finish_reason: the string or the token id.
json StopReason(const v1::StopMatch& match) {
  switch (match.stop_case()) {
    case v1::StopMatch::kTokenId:
      return match.token_id();
    case v1::StopMatch::kStopString:
      return match.stop_string();
    default:
      return nullptr;
  }
}

json Usage(const v1::Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens()},
          {"completion_tokens", usage.completion_tokens()},
          {"total_tokens", usage.prompt_tokens() + usage.completion_tokens()}};
}

json Bytes(const std::string& text) {
  json bytes = json::array();
  for (const char byte : text) bytes.push_back(static_cast<unsigned char>(byte));
  return bytes;
}

// Characters (code points) of UTF-8 `text`: what the legacy text_offset counts.
int64_t Characters(const std::string& text) {
  int64_t count = 0;
  for (const char byte : text) count += (static_cast<unsigned char>(byte) & 0xC0) != 0x80;
  return count;
}

}  // namespace

Reply::Reply(Endpoint endpoint, const std::string& request_id, std::string model,
             const text::Tokenizer* tokenizer, bool include_usage)
    : endpoint_(endpoint),
      id_(absl::StrCat(endpoint == Endpoint::kCompletions ? "cmpl-" : "chatcmpl-", request_id)),
      model_(std::move(model)),
      created_(static_cast<int64_t>(std::time(nullptr))),
      tokenizer_(tokenizer),
      include_usage_(include_usage) {}

json Reply::Envelope(const char* object) const {
  return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
}

std::string Reply::TokenText(uint32_t id) const {
  std::string bytes;
  if (tokenizer_ == nullptr || !tokenizer_->AppendTokenBytes(id, {}, bytes).ok()) {
    return absl::StrCat("token_id:", id);
  }
  return bytes;
}

json Reply::Logprobs(const google::protobuf::RepeatedPtrField<v1::TokenLogprob>& logprobs) {
  if (endpoint_ == Endpoint::kChatCompletions) {
    json content = json::array();
    for (const v1::TokenLogprob& logprob : logprobs) {
      const std::string token = TokenText(logprob.token_id());
      json top = json::array();
      for (const v1::TokenLogprob::Candidate& candidate : logprob.top_logprobs()) {
        const std::string text = TokenText(candidate.token_id());
        top.push_back({{"token", text}, {"logprob", candidate.logprob()}, {"bytes", Bytes(text)}});
      }
      content.push_back({{"token", token},
                         {"logprob", logprob.logprob()},
                         {"bytes", Bytes(token)},
                         {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}};
  }
  // The legacy completions form: parallel arrays.
  json tokens = json::array();
  json token_logprobs = json::array();
  json top_logprobs = json::array();
  json offsets = json::array();
  for (const v1::TokenLogprob& logprob : logprobs) {
    const std::string token = TokenText(logprob.token_id());
    tokens.push_back(token);
    token_logprobs.push_back(logprob.logprob());
    json top = json::object();
    for (const v1::TokenLogprob::Candidate& candidate : logprob.top_logprobs()) {
      top[TokenText(candidate.token_id())] = candidate.logprob();
    }
    top_logprobs.push_back(std::move(top));
    offsets.push_back(text_offset_);
    text_offset_ += Characters(token);
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(offsets)}};
}

json Reply::Whole(const v1::GenerateResponse& response) {
  const bool chat = endpoint_ == Endpoint::kChatCompletions;
  json choice = {
      {"index", 0},
      {"logprobs", response.logprobs().empty() ? json(nullptr) : Logprobs(response.logprobs())},
      {"finish_reason", FinishReason(response.finish_reason())},
      {"stop_reason", StopReason(response.stop_match())}};
  if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", response.text()}};
  } else {
    choice["text"] = response.text();
  }
  json whole = Envelope(chat ? "chat.completion" : "text_completion");
  whole["choices"] = json::array({std::move(choice)});
  whole["usage"] = Usage(response.usage());
  return whole;
}

json Reply::Chunk(const v1::GenerateStreamResponse& message) {
  usage_ = message.usage();
  const bool chat = endpoint_ == Endpoint::kChatCompletions;
  const bool finished = message.finish_reason() != v1::FINISH_REASON_UNSPECIFIED;
  json choice = {
      {"index", 0},
      {"logprobs", message.logprobs().empty() ? json(nullptr) : Logprobs(message.logprobs())},
      {"finish_reason", FinishReason(message.finish_reason())}};
  if (finished) choice["stop_reason"] = StopReason(message.stop_match());
  if (chat) {
    json delta = {{"content", message.text()}};
    if (first_chunk_) delta["role"] = "assistant";
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = message.text();
  }
  first_chunk_ = false;
  json chunk = Envelope(chat ? "chat.completion.chunk" : "text_completion");
  chunk["choices"] = json::array({std::move(choice)});
  if (include_usage_) chunk["usage"] = nullptr;
  return chunk;
}

json Reply::UsageChunk() const {
  json chunk = Envelope(endpoint_ == Endpoint::kChatCompletions ? "chat.completion.chunk"
                                                                : "text_completion");
  chunk["choices"] = json::array();
  chunk["usage"] = Usage(usage_);
  return chunk;
}

int HttpStatusOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

json ErrorObject(const absl::Status& status) {
  const int http_status = HttpStatusOf(status);
  const char* type = http_status == 401   ? "authentication_error"
                     : http_status == 403 ? "permission_error"
                     : http_status == 429 ? "rate_limit_error"
                     : http_status == 503 ? "service_unavailable_error"
                     : http_status < 500  ? "invalid_request_error"
                                          : "server_error";
  const std::string param = ParamOf(status);
  return {{"error",
           {{"message", std::string(status.message())},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", http_status}}}};
}

std::string Serialize(const json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
}

}  // namespace specd::openai
