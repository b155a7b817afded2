#pragma once
// The body of an OpenAI `POST /v1/completions` or `/v1/chat/completions` read into the
// GenerationService's request (protos/specd/v1/generation.proto), so both APIs run the same
// handler on the same fields. Every parameter is either mapped or refused: one the engine cannot
// honour (n > 1, tools, echo, logit_bias, …) or does not know is INVALID_ARGUMENT naming it,
// never silently ignored. JSON null means "unset", as OpenAI's own clients send it.
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "specd/v1/generation.pb.h"

namespace specd::openai {

enum class Endpoint { kCompletions, kChatCompletions };

struct OpenAiRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;  // as the request names it; empty when it names none
  v1::GenerateStreamRequest generate;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
};

// Parses `body`. A refusal is INVALID_ARGUMENT with the parameter in ParamOf.
absl::StatusOr<OpenAiRequest> ParseRequest(Endpoint endpoint, std::string_view body);

// The OpenAI parameter an error is about ("messages[1].content", "max_tokens"), or empty. Errors
// of the generation handler name the GenerationService field ("sampling.max_new_tokens = 0 …");
// those are translated to the OpenAI name.
std::string ParamOf(const absl::Status& status);

}  // namespace specd::openai
