#include "services/openai/openai_request.h"

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace specd::openai {
namespace {

using nlohmann::json;

constexpr char kParamPayload[] = "type.specd.dev/openai.param";

absl::Status Refuse(const std::string& param, absl::string_view message) {
  absl::Status status = absl::InvalidArgumentError(absl::StrCat(param, ": ", message));
  status.SetPayload(kParamPayload, absl::Cord(param));
  return status;
}

absl::Status TypeError(const std::string& param, absl::string_view expected) {
  return Refuse(param, absl::StrCat("must be ", expected));
}

absl::StatusOr<double> Number(const json& value, const std::string& param) {
  if (!value.is_number()) return TypeError(param, "a number");
  return value.get<double>();
}

absl::StatusOr<int64_t> Integer(const json& value, const std::string& param) {
  if (!value.is_number_integer()) return TypeError(param, "an integer");
  return value.get<int64_t>();
}

absl::StatusOr<uint32_t> Count(const json& value, const std::string& param) {
  absl::StatusOr<int64_t> count = Integer(value, param);
  if (!count.ok()) return count.status();
  if (*count < 0 || *count > UINT32_MAX) return TypeError(param, "a non-negative integer");
  return static_cast<uint32_t>(*count);
}

absl::StatusOr<bool> Bool(const json& value, const std::string& param) {
  if (!value.is_boolean()) return TypeError(param, "true or false");
  return value.get<bool>();
}

absl::StatusOr<std::string> String(const json& value, const std::string& param) {
  if (!value.is_string()) return TypeError(param, "a string");
  return value.get<std::string>();
}

// A JSON object's members, each handled by the function its name maps to; a member no entry
// names is refused. Null members are unset and skipped.
using MemberHandlers = std::map<std::string, std::function<absl::Status(const json&)>>;

absl::Status ForEachMember(const json& object, const std::string& prefix,
                           const MemberHandlers& handlers) {
  if (!object.is_object()) return TypeError(prefix.empty() ? "body" : prefix, "a JSON object");
  for (const auto& [name, value] : object.items()) {
    if (value.is_null()) continue;
    const std::string param = prefix.empty() ? name : absl::StrCat(prefix, ".", name);
    const auto handler = handlers.find(name);
    if (handler == handlers.end()) {
      return Refuse(param,
                    "unrecognized request argument (specd supports the parameters its "
                    "README's HTTP API section lists)");
    }
    if (absl::Status handled = handler->second(value); !handled.ok()) return handled;
  }
  return absl::OkStatus();
}

// A handler that stores a parsed value: `parse(value, param)` then `set(result)`.
template <typename Parse, typename Set>
std::function<absl::Status(const json&)> Field(std::string param, Parse parse, Set set) {
  return [param = std::move(param), parse, set](const json& value) -> absl::Status {
    auto parsed = parse(value, param);
    if (!parsed.ok()) return parsed.status();
    set(*parsed);
    return absl::OkStatus();
  };
}

// A parameter that is accepted only at its default `allowed(value)`.
std::function<absl::Status(const json&)> OnlyDefault(std::string param,
                                                     std::function<bool(const json&)> allowed,
                                                     std::string why) {
  return [param = std::move(param), allowed = std::move(allowed),
          why = std::move(why)](const json& value) -> absl::Status {
    if (allowed(value)) return absl::OkStatus();
    return Refuse(param, why);
  };
}

absl::Status ParseStop(const json& value, v1::SamplingParams& sampling) {
  if (value.is_string()) {
    sampling.add_stop(value.get<std::string>());
    return absl::OkStatus();
  }
  if (!value.is_array()) return TypeError("stop", "a string or an array of strings");
  for (const json& stop : value) {
    if (!stop.is_string()) return TypeError("stop", "a string or an array of strings");
    sampling.add_stop(stop.get<std::string>());
  }
  return absl::OkStatus();
}

absl::Status ParseTokenIds(const json& value, const std::string& param, v1::TokenIds& ids) {
  for (const json& id : value) {
    absl::StatusOr<uint32_t> parsed = Count(id, param);
    if (!parsed.ok()) return parsed.status();
    ids.add_ids(*parsed);
  }
  return absl::OkStatus();
}

// prompt: a string, an array of token ids, or either as the one element of an array.
absl::Status ParsePrompt(const json& value, v1::Prompt& prompt) {
  const json* single = &value;
  if (value.is_array() && !value.empty() && (value[0].is_string() || value[0].is_array())) {
    if (value.size() != 1) {
      return Refuse("prompt", "a batch of prompts is not supported: send one prompt per request");
    }
    single = &value[0];
  }
  if (single->is_string()) {
    prompt.set_text(single->get<std::string>());
    return absl::OkStatus();
  }
  if (single->is_array()) return ParseTokenIds(*single, "prompt", *prompt.mutable_token_ids());
  return TypeError("prompt", "a string, an array of token ids, or a one-element array of either");
}

// A message's content: a string, or an array of text parts (concatenated).
absl::StatusOr<std::string> ParseContent(const json& value, const std::string& param) {
  if (value.is_null()) return std::string();
  if (value.is_string()) return value.get<std::string>();
  if (!value.is_array()) return TypeError(param, "a string or an array of text parts");
  std::string text;
  for (size_t i = 0; i < value.size(); ++i) {
    const json& part = value[i];
    const std::string part_param = absl::StrCat(param, "[", i, "]");
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
        !part.contains("text") || !part["text"].is_string()) {
      return Refuse(part_param,
                    "only text parts ({\"type\": \"text\", \"text\": …}) are supported");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

absl::Status ParseMessages(const json& value, v1::ChatInput& chat) {
  if (!value.is_array() || value.empty()) return TypeError("messages", "a non-empty array");
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string param = absl::StrCat("messages[", i, "]");
    v1::ChatMessage& message = *chat.add_messages();
    absl::Status parsed = ForEachMember(
        value[i], param,
        {{"role", Field(param + ".role", String,
                        [&](const std::string& role) {
                          // OpenAI's newer name for the system turn.
                          message.set_role(role == "developer" ? "system" : role);
                        })},
         {"content",
          [&](const json& content) -> absl::Status {
            absl::StatusOr<std::string> text = ParseContent(content, param + ".content");
            if (!text.ok()) return text.status();
            message.set_content(*text);
            return absl::OkStatus();
          }},
         {"reasoning_content",
          Field(param + ".reasoning_content", String,
                [&](const std::string& text) { message.set_reasoning_content(text); })},
         // Names label turns for the client; Qwen's chat template renders none.
         {"name", Field(param + ".name", String, [](const std::string&) {})},
         {"tool_calls", OnlyDefault(
                            param + ".tool_calls", [](const json& calls) { return calls.empty(); },
                            "tool calls are not supported")},
         {"tool_call_id", Field(param + ".tool_call_id", String, [](const std::string&) {})}});
    if (!parsed.ok()) return parsed;
    if (message.role().empty()) return Refuse(param + ".role", "is required");
  }
  return absl::OkStatus();
}

absl::Status ParseSpeculation(const json& value, v1::SpeculationParams& speculation) {
  return ForEachMember(
      value, "speculation",
      {{"block_size", Field("speculation.block_size", Count,
                            [&](uint32_t size) { speculation.set_block_size(size); })},
       {"draft_window", Field("speculation.draft_window", Count,
                              [&](uint32_t window) { speculation.set_draft_window(window); })},
       {"min_draft_confidence", Field("speculation.min_draft_confidence", Number,
                                      [&](double confidence) {
                                        speculation.set_min_draft_confidence(
                                            static_cast<float>(confidence));
                                      })},
       {"draft_acceptance", [&](const json& value) -> absl::Status {
          const std::string param = "speculation.draft_acceptance";
          absl::StatusOr<std::string> name = String(value, param);
          if (!name.ok()) return name.status();
          if (*name == "match") {
            speculation.set_draft_acceptance(v1::DRAFT_ACCEPTANCE_MATCH);
          } else if (*name == "rejection-sampling") {
            speculation.set_draft_acceptance(v1::DRAFT_ACCEPTANCE_REJECTION_SAMPLING);
          } else {
            return Refuse(param, "must be \"match\" or \"rejection-sampling\"");
          }
          return absl::OkStatus();
        }}});
}

// The parameters both endpoints share, onto `request`.
MemberHandlers CommonParameters(OpenAiRequest& request, bool& stream_options_given) {
  v1::SamplingParams& sampling = *request.generate.mutable_sampling();
  auto number = [&](const char* name, void (v1::SamplingParams::*set)(float)) {
    return Field(name, Number,
                 [&sampling, set](double value) { (sampling.*set)(static_cast<float>(value)); });
  };
  auto flag = [&](const char* name, void (v1::SamplingParams::*set)(bool)) {
    return Field(name, Bool, [&sampling, set](bool value) { (sampling.*set)(value); });
  };
  return {
      {"model", Field("model", String, [&](const std::string& model) { request.model = model; })},
      {"stream", Field("stream", Bool, [&](bool stream) { request.stream = stream; })},
      {"stream_options",
       [&](const json& value) {
         stream_options_given = true;
         return ForEachMember(
             value, "stream_options",
             {{"include_usage", Field("stream_options.include_usage", Bool,
                                      [&](bool include) { request.include_usage = include; })}});
       }},
      {"temperature", number("temperature", &v1::SamplingParams::set_temperature)},
      {"top_p", number("top_p", &v1::SamplingParams::set_top_p)},
      {"min_p", number("min_p", &v1::SamplingParams::set_min_p)},
      {"repetition_penalty",
       number("repetition_penalty", &v1::SamplingParams::set_repetition_penalty)},
      {"presence_penalty", number("presence_penalty", &v1::SamplingParams::set_presence_penalty)},
      {"frequency_penalty",
       number("frequency_penalty", &v1::SamplingParams::set_frequency_penalty)},
      // -1 is vLLM's "off", as 0 is ours.
      {"top_k", Field("top_k", Integer,
                      [&](int64_t top_k) {
                        sampling.set_top_k(top_k == -1 ? 0 : static_cast<uint32_t>(top_k));
                      })},
      {"seed", Field("seed", Integer,
                     [&](int64_t seed) { sampling.set_seed(static_cast<uint64_t>(seed)); })},
      {"stop", [&](const json& value) { return ParseStop(value, sampling); }},
      {"stop_token_ids",
       [&](const json& value) -> absl::Status {
         if (!value.is_array()) return TypeError("stop_token_ids", "an array of token ids");
         for (const json& id : value) {
           absl::StatusOr<uint32_t> parsed = Count(id, "stop_token_ids");
           if (!parsed.ok()) return parsed.status();
           sampling.add_stop_token_ids(*parsed);
         }
         return absl::OkStatus();
       }},
      {"ignore_eos", flag("ignore_eos", &v1::SamplingParams::set_ignore_eos)},
      {"include_stop_str_in_output",
       flag("include_stop_str_in_output", &v1::SamplingParams::set_include_stop_str_in_output)},
      {"skip_special_tokens",
       flag("skip_special_tokens", &v1::SamplingParams::set_skip_special_tokens)},
      {"min_tokens",
       Field("min_tokens", Count, [&](uint32_t count) { sampling.set_min_new_tokens(count); })},
      {"speculation",
       [&](const json& value) {
         return ParseSpeculation(value, *request.generate.mutable_speculation());
       }},
      {"n", OnlyDefault(
                "n", [](const json& n) { return n == 1; },
                "only n = 1 is supported: send one request per completion")},
      {"logit_bias", OnlyDefault(
                         "logit_bias", [](const json& bias) { return bias.empty(); },
                         "logit_bias is not supported")},
      // An end-user id for the client's own records; it changes nothing here.
      {"user", Field("user", String, [](const std::string&) {})},
  };
}

void AddCompletionParameters(OpenAiRequest& request, MemberHandlers& handlers,
                             bool& max_tokens_given) {
  v1::SamplingParams& sampling = *request.generate.mutable_sampling();
  handlers["prompt"] = [&](const json& value) {
    return ParsePrompt(value, *request.generate.mutable_prompt());
  };
  handlers["max_tokens"] = Field("max_tokens", Count, [&](uint32_t count) {
    max_tokens_given = true;
    sampling.set_max_new_tokens(count);
  });
  handlers["logprobs"] = Field("logprobs", Count, [&](uint32_t count) {
    sampling.set_logprobs(true);
    sampling.set_top_logprobs(count);
  });
  handlers["echo"] = OnlyDefault(
      "echo", [](const json& echo) { return echo == false; },
      "echoing the prompt is not supported");
  handlers["best_of"] = OnlyDefault(
      "best_of", [](const json& best_of) { return best_of == 1; }, "only best_of = 1 is supported");
  handlers["suffix"] = OnlyDefault(
      "suffix", [](const json& suffix) { return suffix == ""; },
      "suffix (insertion) is not supported");
}

void AddChatParameters(OpenAiRequest& request, MemberHandlers& handlers, bool& logprobs_given,
                       bool& top_logprobs_given) {
  v1::SamplingParams& sampling = *request.generate.mutable_sampling();
  v1::ChatInput& chat = *request.generate.mutable_prompt()->mutable_chat();
  handlers["messages"] = [&](const json& value) { return ParseMessages(value, chat); };
  // max_completion_tokens is OpenAI's newer name; where both come it wins.
  handlers["max_tokens"] = Field("max_tokens", Count, [&](uint32_t count) {
    if (!sampling.has_max_new_tokens()) sampling.set_max_new_tokens(count);
  });
  handlers["max_completion_tokens"] = Field(
      "max_completion_tokens", Count, [&](uint32_t count) { sampling.set_max_new_tokens(count); });
  handlers["logprobs"] = Field("logprobs", Bool, [&](bool logprobs) {
    logprobs_given = logprobs;
    sampling.set_logprobs(logprobs);
  });
  handlers["top_logprobs"] = Field("top_logprobs", Count, [&](uint32_t count) {
    top_logprobs_given = true;
    sampling.set_top_logprobs(count);
  });
  handlers["chat_template_kwargs"] = [&](const json& value) {
    return ForEachMember(
        value, "chat_template_kwargs",
        {{"enable_thinking", Field("chat_template_kwargs.enable_thinking", Bool,
                                   [&](bool thinking) { chat.set_enable_thinking(thinking); })}});
  };
  handlers["tools"] = OnlyDefault(
      "tools", [](const json& tools) { return tools.empty(); }, "tool calling is not supported");
  handlers["tool_choice"] = OnlyDefault(
      "tool_choice", [](const json& choice) { return choice == "none"; },
      "tool calling is not supported (only \"none\")");
  handlers["parallel_tool_calls"] = Field("parallel_tool_calls", Bool, [](bool) {});
  handlers["functions"] = OnlyDefault(
      "functions", [](const json& functions) { return functions.empty(); },
      "function calling is not supported");
  handlers["function_call"] = OnlyDefault(
      "function_call", [](const json& call) { return call == "none"; },
      "function calling is not supported");
  handlers["response_format"] = OnlyDefault(
      "response_format",
      [](const json& format) {
        return format.is_object() && format.size() == 1 && format.value("type", "") == "text";
      },
      "only {\"type\": \"text\"} is supported (no JSON mode or schemas)");
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseRequest(Endpoint endpoint, std::string_view body) {
  const json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Refuse("body", "is not valid JSON");
  OpenAiRequest request;
  request.endpoint = endpoint;
  bool stream_options_given = false;
  bool max_tokens_given = false;
  bool logprobs_given = false;
  bool top_logprobs_given = false;
  MemberHandlers handlers = CommonParameters(request, stream_options_given);
  if (endpoint == Endpoint::kCompletions) {
    AddCompletionParameters(request, handlers, max_tokens_given);
  } else {
    AddChatParameters(request, handlers, logprobs_given, top_logprobs_given);
  }
  if (absl::Status read = ForEachMember(parsed, "", handlers); !read.ok()) return read;

  if (endpoint == Endpoint::kCompletions) {
    if (!request.generate.prompt().has_text() && !request.generate.prompt().has_token_ids()) {
      return Refuse("prompt", "is required");
    }
    // OpenAI's default for the legacy endpoint (the chat one's is "as many as fit").
    if (!max_tokens_given) request.generate.mutable_sampling()->set_max_new_tokens(16);
  } else {
    if (!request.generate.prompt().has_chat()) return Refuse("messages", "is required");
    if (top_logprobs_given && !logprobs_given) {
      return Refuse("top_logprobs", "needs logprobs = true");
    }
  }
  if (stream_options_given && !request.stream) {
    return Refuse("stream_options", "is only allowed with stream = true");
  }
  return request;
}

std::string ParamOf(const absl::Status& status) {
  if (absl::optional<absl::Cord> param = status.GetPayload(kParamPayload); param.has_value()) {
    return std::string(*param);
  }
  // The handler's field names, as OpenAI calls them.
  static const std::map<std::string, std::string, std::less<>> kOpenAiNames = {
      {"max_new_tokens", "max_tokens"}, {"min_new_tokens", "min_tokens"}};
  const absl::string_view message = status.message();
  if (absl::StartsWith(message, "sampling.")) {
    absl::string_view field = message.substr(std::string_view("sampling.").size());
    field = field.substr(0, field.find_first_of(" :=,"));
    const auto renamed = kOpenAiNames.find(field);
    return renamed == kOpenAiNames.end() ? std::string(field) : renamed->second;
  }
  for (const char* whole : {"speculation", "prompt"}) {
    if (absl::StartsWith(message, whole)) return whole;
  }
  return "";
}

}  // namespace specd::openai
