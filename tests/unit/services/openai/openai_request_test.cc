// What an OpenAI request body becomes: the GenerationService request of the same meaning, or a
// refusal naming the parameter — never a parameter silently dropped.
#include "services/openai/openai_request.h"

#include <string>

#include "gtest/gtest.h"

namespace specd::openai {
namespace {

v1::GenerateStreamRequest Parsed(Endpoint endpoint, const std::string& body) {
  absl::StatusOr<OpenAiRequest> request = ParseRequest(endpoint, body);
  EXPECT_TRUE(request.ok()) << request.status();
  return request.ok() ? request->generate : v1::GenerateStreamRequest();
}

TEST(OpenAiRequestTest, CompletionParametersMapOntoTheSamplingParams) {
  const v1::GenerateStreamRequest request = Parsed(Endpoint::kCompletions, R"({
      "model": "m", "prompt": "Hello", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9,
      "top_k": 40, "min_p": 0.05, "seed": 11, "stop": ["\n", "END"], "presence_penalty": 0.1,
      "frequency_penalty": 0.2, "repetition_penalty": 1.1, "ignore_eos": true, "min_tokens": 2,
      "stop_token_ids": [5, 6], "logprobs": 3, "skip_special_tokens": false,
      "include_stop_str_in_output": true,
      "speculation": {"block_size": 4, "draft_window": 64, "min_draft_confidence": 0.25,
                      "draft_acceptance": "rejection-sampling"},
      "user": "someone", "n": 1, "echo": false, "best_of": 1, "logit_bias": {}, "suffix": null})");
  EXPECT_EQ(request.prompt().text(), "Hello");
  const v1::SamplingParams& sampling = request.sampling();
  EXPECT_EQ(sampling.max_new_tokens(), 7u);
  EXPECT_FLOAT_EQ(sampling.temperature(), 0.5f);
  EXPECT_FLOAT_EQ(sampling.top_p(), 0.9f);
  EXPECT_EQ(sampling.top_k(), 40u);
  EXPECT_FLOAT_EQ(sampling.min_p(), 0.05f);
  EXPECT_EQ(sampling.seed(), 11u);
  ASSERT_EQ(sampling.stop_size(), 2);
  EXPECT_EQ(sampling.stop(1), "END");
  EXPECT_FLOAT_EQ(sampling.presence_penalty(), 0.1f);
  EXPECT_FLOAT_EQ(sampling.frequency_penalty(), 0.2f);
  EXPECT_FLOAT_EQ(sampling.repetition_penalty(), 1.1f);
  EXPECT_TRUE(sampling.ignore_eos());
  EXPECT_EQ(sampling.min_new_tokens(), 2u);
  EXPECT_EQ(sampling.stop_token_ids_size(), 2);
  EXPECT_TRUE(sampling.logprobs());
  EXPECT_EQ(sampling.top_logprobs(), 3u);
  EXPECT_FALSE(sampling.skip_special_tokens());
  EXPECT_TRUE(sampling.include_stop_str_in_output());
  EXPECT_EQ(request.speculation().block_size(), 4u);
  EXPECT_EQ(request.speculation().draft_window(), 64u);
  EXPECT_FLOAT_EQ(request.speculation().min_draft_confidence(), 0.25f);
  EXPECT_EQ(request.speculation().draft_acceptance(), v1::DRAFT_ACCEPTANCE_REJECTION_SAMPLING);
}

TEST(OpenAiRequestTest, ACompletionWithoutMaxTokensGetsOpenAisSixteen) {
  EXPECT_EQ(Parsed(Endpoint::kCompletions, R"({"prompt": "x"})").sampling().max_new_tokens(), 16u);
  EXPECT_FALSE(Parsed(Endpoint::kChatCompletions, R"({"messages": [{"role": "user",
      "content": "x"}]})")
                   .sampling()
                   .has_max_new_tokens());
}

TEST(OpenAiRequestTest, APromptIsTextOrTokenIdsAloneOrAsTheOneElementOfABatch) {
  EXPECT_EQ(Parsed(Endpoint::kCompletions, R"({"prompt": ["only"]})").prompt().text(), "only");
  const v1::GenerateStreamRequest ids =
      Parsed(Endpoint::kCompletions, R"({"prompt": [[3, 1, 4]]})");
  ASSERT_EQ(ids.prompt().token_ids().ids_size(), 3);
  EXPECT_EQ(ids.prompt().token_ids().ids(2), 4u);
  EXPECT_EQ(Parsed(Endpoint::kCompletions, R"({"prompt": [1, 5]})").prompt().token_ids().ids(1),
            5u);
}

TEST(OpenAiRequestTest, ChatMessagesKeepTheirTurnsAndTextParts) {
  const v1::GenerateStreamRequest request = Parsed(Endpoint::kChatCompletions, R"({
      "messages": [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text",
                                                                      "text": "there"}]},
        {"role": "assistant", "content": "Hello", "reasoning_content": "greet", "name": "bot"}],
      "max_tokens": 3, "max_completion_tokens": 9, "logprobs": true, "top_logprobs": 2,
      "chat_template_kwargs": {"enable_thinking": false}, "tool_choice": "none",
      "response_format": {"type": "text"}})");
  const v1::ChatInput& chat = request.prompt().chat();
  ASSERT_EQ(chat.messages_size(), 3);
  EXPECT_EQ(chat.messages(0).role(), "system");
  EXPECT_EQ(chat.messages(1).content(), "Hi there");
  EXPECT_EQ(chat.messages(2).reasoning_content(), "greet");
  EXPECT_FALSE(chat.enable_thinking());
  EXPECT_EQ(request.sampling().max_new_tokens(), 9u);  // max_completion_tokens wins
  EXPECT_EQ(request.sampling().top_logprobs(), 2u);
}

TEST(OpenAiRequestTest, StreamOptionsComeWithAStream) {
  absl::StatusOr<OpenAiRequest> request =
      ParseRequest(Endpoint::kCompletions,
                   R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": true}})");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_TRUE(request->stream);
  EXPECT_TRUE(request->include_usage);
}

struct Refusal {
  Endpoint endpoint;
  std::string body;
  std::string param;
};

TEST(OpenAiRequestTest, WhatTheEngineCannotHonourIsRefusedNamingTheParameter) {
  const std::string chat = R"("messages": [{"role": "user", "content": "x"}])";
  const Refusal refusals[] = {
      {Endpoint::kCompletions, R"({"prompt": "x", "n": 2})", "n"},
      {Endpoint::kCompletions, R"({"prompt": "x", "best_of": 3})", "best_of"},
      {Endpoint::kCompletions, R"({"prompt": "x", "echo": true})", "echo"},
      {Endpoint::kCompletions, R"({"prompt": "x", "suffix": "y"})", "suffix"},
      {Endpoint::kCompletions, R"({"prompt": "x", "logit_bias": {"5": 10}})", "logit_bias"},
      {Endpoint::kCompletions, R"({"prompt": ["a", "b"]})", "prompt"},
      {Endpoint::kCompletions, R"({"prompt": "x", "frobnicate": 1})", "frobnicate"},
      {Endpoint::kCompletions, R"({"prompt": "x", "temperature": "hot"})", "temperature"},
      {Endpoint::kCompletions, R"({"prompt": "x", "max_tokens": -1})", "max_tokens"},
      {Endpoint::kCompletions, R"({"prompt": "x", "stream_options": {"include_usage": true}})",
       "stream_options"},
      {Endpoint::kCompletions, R"({"prompt": "x", "speculation": {"blocks": 4}})",
       "speculation.blocks"},
      {Endpoint::kCompletions,
       R"({"prompt": "x", "speculation": {"draft_acceptance": "rejection"}})",
       "speculation.draft_acceptance"},
      {Endpoint::kCompletions, R"({"max_tokens": 4})", "prompt"},
      {Endpoint::kCompletions, R"({"prompt": )", "body"},
      {Endpoint::kChatCompletions, "{" + chat + R"(, "tools": [{"type": "function"}]})", "tools"},
      {Endpoint::kChatCompletions, "{" + chat + R"(, "tool_choice": "auto"})", "tool_choice"},
      {Endpoint::kChatCompletions, "{" + chat + R"(, "response_format": {"type": "json_object"}})",
       "response_format"},
      {Endpoint::kChatCompletions, "{" + chat + R"(, "top_logprobs": 2})", "top_logprobs"},
      {Endpoint::kChatCompletions, "{" + chat + R"(, "chat_template_kwargs": {"x": 1}})",
       "chat_template_kwargs.x"},
      {Endpoint::kChatCompletions,
       R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content[0]"},
      {Endpoint::kChatCompletions,
       R"({"messages": [{"role": "assistant", "tool_calls": [{"id": "1"}]}]})",
       "messages[0].tool_calls"},
      {Endpoint::kChatCompletions, R"({"messages": [{"content": "x"}]})", "messages[0].role"},
      {Endpoint::kChatCompletions, R"({"messages": []})", "messages"},
      {Endpoint::kChatCompletions, R"({"prompt": "x"})", "prompt"},
  };
  for (const Refusal& refusal : refusals) {
    absl::StatusOr<OpenAiRequest> request = ParseRequest(refusal.endpoint, refusal.body);
    ASSERT_FALSE(request.ok()) << refusal.body;
    EXPECT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument) << refusal.body;
    EXPECT_EQ(ParamOf(request.status()), refusal.param) << refusal.body << ": " << request.status();
  }
}

TEST(OpenAiRequestTest, TheHandlersFieldNamesBecomeOpenAisInErrors) {
  EXPECT_EQ(ParamOf(absl::InvalidArgumentError("sampling.max_new_tokens = 0 is outside [1, 9]")),
            "max_tokens");
  EXPECT_EQ(ParamOf(absl::InvalidArgumentError("sampling.temperature: -1 is outside [0, 100]")),
            "temperature");
  EXPECT_EQ(ParamOf(absl::InvalidArgumentError("prompt: token id 9 is outside the vocabulary")),
            "prompt");
  EXPECT_EQ(ParamOf(absl::UnavailableError("no target verifier is serving yet")), "");
}

}  // namespace
}  // namespace specd::openai
