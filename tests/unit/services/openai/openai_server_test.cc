// The OpenAI-compatible HTTP API as an HTTP client sees it on loopback, over a real in-process
// pair: a completion is what the GenerationService gives for the same request, a stream adds
// up to the whole reply, refusals carry OpenAI's error object and status, the API key guards
// every path but /health, a full queue is 429, and a client that goes away aborts its request.
#include "services/openai/openai_server.h"

#include <httplib.h>
#include <prometheus/registry.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/engine/in_process_ports.h"
#include "common/io/qwen35_config.h"
#include "common/metrics/exposition.h"
#include "common/model/synthetic/random_checkpoint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"
#include "tests/unit/services/orchestrator/pair_handlers.h"

namespace specd::openai {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The qwen35-tiny-a shape with the vocabulary of the Qwen3 tokenizer, so that text and chat
// prompts run; written once for the suite.
std::filesystem::path WriteModelWithTokenizerVocabulary() {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                    ("specd_openai_model_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ifstream file(::specd::testing::FixtureDir("qwen35-tiny-a") / "config.json");
  absl::StatusOr<io::Qwen35TextConfig> config =
      io::ParseQwen35TextConfig(json::parse(file), "qwen35-tiny-a");
  EXPECT_TRUE(config.ok()) << config.status();
  config->vocab_size = 151936;
  const absl::Status written = model::WriteRandomQwen35Checkpoint(dir, *config, {});
  EXPECT_TRUE(written.ok()) << written;
  return dir;
}

// The data of each `data: …` event of a server-sent event stream, in order.
std::vector<std::string> Events(const std::string& body) {
  std::vector<std::string> events;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    events.push_back(body.substr(at + 6, end - at - 6));
    at = end;
  }
  return events;
}

class OpenAiServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_dir_ = new std::filesystem::path(WriteModelWithTokenizerVocabulary());
    absl::StatusOr<model::Qwen35Model> target = model::Qwen35Model::Load(*model_dir_);
    ASSERT_TRUE(target.ok()) << target.status();
    target_ = new model::Qwen35Model(*std::move(target));
    absl::StatusOr<text::Tokenizer> tokenizer = text::Tokenizer::FromFile(
        ::specd::testing::CacheDir() / "tokenizer" / "qwen3" / "tokenizer.json");
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status() << " (scripts/setup.sh fetches it)";
    tokenizer_ = new text::Tokenizer(*std::move(tokenizer));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete target_;
    std::filesystem::remove_all(*model_dir_);
    delete model_dir_;
  }

  // A handler over an in-process pair and the API on it; `api_key` empty: open.
  void Serve(const std::string& api_key = "", int64_t max_running = 4, int64_t max_waiting = 4) {
    verifier_ = orchestrator::testing::PairVerifier(*target_, /*max_session_length=*/4096);
    drafter_ = orchestrator::testing::PairDrafter(*target_);
    ASSERT_TRUE(verifier_ != nullptr && drafter_ != nullptr);
    absl::StatusOr<std::unique_ptr<orchestrator::BackendPool>> pool =
        orchestrator::BackendPool::Fixed(
            {.host = "in-process",
             .verifier = verifier_,
             .drafter = drafter_,
             .in_process = std::make_shared<engine::InProcessPair>(*target_, &drafter_->drafter())},
            absl::Seconds(5));
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = *std::move(pool);
    orchestrator::OrchestratorOptions options;
    options.model_name = "test";
    options.max_running = max_running;
    options.max_waiting = max_waiting;
    absl::StatusOr<std::unique_ptr<orchestrator::GenerationHandler>> handler =
        orchestrator::GenerationHandler::Create(*pool_, tokenizer_, registry_, options);
    ASSERT_TRUE(handler.ok()) << handler.status();
    handler_ = *std::move(handler);
    OpenAiServerOptions api;
    api.http.host = "127.0.0.1";
    api.http.threads = static_cast<int>(max_running + max_waiting) + 4;
    api.model_name = "test";
    api.api_key = api_key;
    absl::StatusOr<std::unique_ptr<OpenAiServer>> server =
        OpenAiServer::Start(*handler_, tokenizer_, api);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  void TearDown() override {
    if (handler_ != nullptr) handler_->Shutdown(absl::Seconds(5));
    server_.reset();
  }

  httplib::Client Client() const {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_read_timeout(60);
    return client;
  }

  httplib::Result Post(const std::string& path, const json& body,
                       const httplib::Headers& headers = {}) const {
    return Client().Post(path.c_str(), headers, body.dump(), "application/json");
  }

  // POSTs `body` and hands each piece of the response body to `receive` until it returns false,
  // which drops the connection.
  void PostReading(const json& body, const std::function<bool()>& receive) const {
    httplib::Request request;
    request.method = "POST";
    request.path = "/v1/completions";
    request.body = body.dump();
    request.set_header("Content-Type", "application/json");
    request.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return receive(); };
    httplib::Response response;
    httplib::Error error = httplib::Error::Success;
    Client().send(request, response, error);
  }

  // What the GenerationService gives for `request` on the same handler.
  v1::GenerateResponse Generated(const v1::GenerateRequest& request) {
    absl::StatusOr<v1::GenerateResponse> response =
        handler_->Generate(request, [] { return false; });
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : v1::GenerateResponse();
  }

  // Polls the metrics until `line` shows (a request's end is recorded as its thread unwinds).
  bool MetricsShowWithin(const std::string& line, std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (metrics::Exposition(registry_).find(line) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  static inline std::filesystem::path* model_dir_ = nullptr;
  static inline model::Qwen35Model* target_ = nullptr;
  static inline text::Tokenizer* tokenizer_ = nullptr;
  prometheus::Registry registry_;
  std::shared_ptr<verifier::VerifierHandler> verifier_;
  std::shared_ptr<drafter::DrafterHandler> drafter_;
  std::unique_ptr<orchestrator::BackendPool> pool_;
  std::unique_ptr<orchestrator::GenerationHandler> handler_;
  std::unique_ptr<OpenAiServer> server_;
};

TEST_F(OpenAiServerTest, ACompletionIsWhatTheGenerationServiceGivesForTheSameRequest) {
  Serve();
  const httplib::Result result = Post("/v1/completions", {{"model", "test"},
                                                          {"prompt", "The quick brown fox"},
                                                          {"max_tokens", 12},
                                                          {"temperature", 0},
                                                          {"ignore_eos", true}});
  ASSERT_TRUE(result) << httplib::to_string(result.error());
  ASSERT_EQ(result->status, 200) << result->body;
  const json completion = json::parse(result->body);
  v1::GenerateRequest request;
  request.mutable_prompt()->set_text("The quick brown fox");
  request.mutable_sampling()->set_max_new_tokens(12);
  request.mutable_sampling()->set_temperature(0);
  request.mutable_sampling()->set_ignore_eos(true);
  const v1::GenerateResponse expected = Generated(request);

  EXPECT_EQ(completion["object"], "text_completion");
  EXPECT_THAT(completion["id"].get<std::string>(), StartsWith("cmpl-"));
  EXPECT_EQ(completion["id"], "cmpl-" + result->get_header_value("X-Request-Id"));
  EXPECT_EQ(completion["model"], "test");
  ASSERT_EQ(completion["choices"].size(), 1u);
  EXPECT_EQ(completion["choices"][0]["text"], expected.text());
  EXPECT_EQ(completion["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(completion["usage"]["prompt_tokens"], expected.usage().prompt_tokens());
  EXPECT_EQ(completion["usage"]["completion_tokens"], 12);
  EXPECT_EQ(completion["usage"]["total_tokens"], expected.usage().prompt_tokens() + 12);
}

TEST_F(OpenAiServerTest, AChatStreamAddsUpToTheWholeReplyAndEndsWithUsageAndDone) {
  Serve();
  const json messages = json::array({{{"role", "system"}, {"content", "Be brief."}},
                                     {{"role", "user"}, {"content", "Say hello."}}});
  const json whole_body = {{"model", "test"},
                           {"messages", messages},
                           {"max_tokens", 16},
                           {"temperature", 0},
                           {"ignore_eos", true}};
  const httplib::Result whole = Post("/v1/chat/completions", whole_body);
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200) << whole->body;
  const json reply = json::parse(whole->body);
  EXPECT_EQ(reply["object"], "chat.completion");
  EXPECT_EQ(reply["choices"][0]["message"]["role"], "assistant");

  json stream_body = whole_body;
  stream_body["stream"] = true;
  stream_body["stream_options"] = {{"include_usage", true}};
  const httplib::Result streamed = Post("/v1/chat/completions", stream_body);
  ASSERT_TRUE(streamed);
  ASSERT_EQ(streamed->status, 200) << streamed->body;
  EXPECT_THAT(streamed->get_header_value("Content-Type"), StartsWith("text/event-stream"));
  const std::vector<std::string> events = Events(streamed->body);
  ASSERT_GE(events.size(), 3u) << streamed->body;
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    const json chunk = json::parse(events[i]);
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    EXPECT_TRUE(chunk["usage"].is_null());
    EXPECT_EQ(chunk["choices"][0]["delta"].contains("role"), i == 0) << events[i];
    text += chunk["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(text, reply["choices"][0]["message"]["content"]);
  EXPECT_EQ(json::parse(events[events.size() - 3])["choices"][0]["finish_reason"], "length");
  const json usage = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"], reply["usage"]);
}

TEST_F(OpenAiServerTest, LogprobsComeInEachEndpointsOwnForm) {
  Serve();
  const httplib::Result legacy = Post("/v1/completions", {{"prompt", "Once upon a time"},
                                                          {"max_tokens", 5},
                                                          {"temperature", 0},
                                                          {"ignore_eos", true},
                                                          {"logprobs", 2}});
  ASSERT_TRUE(legacy);
  ASSERT_EQ(legacy->status, 200) << legacy->body;
  const json parallel = json::parse(legacy->body)["choices"][0]["logprobs"];
  ASSERT_EQ(parallel["tokens"].size(), 5u);
  ASSERT_EQ(parallel["token_logprobs"].size(), 5u);
  ASSERT_EQ(parallel["text_offset"].size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_LE(parallel["token_logprobs"][i].get<double>(), 0);
    EXPECT_EQ(parallel["top_logprobs"][i].size(), 2u);
  }
  EXPECT_EQ(parallel["text_offset"][0], 0);

  const httplib::Result chat = Post(
      "/v1/chat/completions", {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
                               {"max_tokens", 4},
                               {"temperature", 0},
                               {"ignore_eos", true},
                               {"logprobs", true},
                               {"top_logprobs", 3}});
  ASSERT_TRUE(chat);
  ASSERT_EQ(chat->status, 200) << chat->body;
  const json content = json::parse(chat->body)["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 4u);
  for (const json& token : content) {
    EXPECT_LE(token["logprob"].get<double>(), 0);
    EXPECT_FALSE(token["bytes"].empty());
    EXPECT_EQ(token["top_logprobs"].size(), 3u);
    // Greedy: the chosen token is the most likely one.
    EXPECT_EQ(token["top_logprobs"][0]["token"], token["token"]);
  }
}

TEST_F(OpenAiServerTest, RefusalsAreOpenAiErrorObjectsWithTheirStatusAndNothingRuns) {
  Serve();
  struct Case {
    std::string path;
    json body;
    int status;
    std::string param;
  };
  const json chat = json::array({{{"role", "user"}, {"content", "x"}}});
  const Case cases[] = {
      {"/v1/completions", {{"prompt", "x"}, {"n", 2}}, 400, "n"},
      {"/v1/chat/completions",
       {{"messages", chat}, {"tools", json::array({{{"type", "f"}}})}},
       400,
       "tools"},
      {"/v1/completions", {{"prompt", "x"}, {"max_tokens", 0}}, 400, "max_tokens"},
      {"/v1/completions", {{"prompt", "x"}, {"temperature", 500}}, 400, "temperature"},
      {"/v1/completions", {{"prompt", json::array({999999})}}, 400, "prompt"},
      {"/v1/completions", {{"model", "gpt-4"}, {"prompt", "x"}}, 404, ""},
  };
  for (const Case& refused : cases) {
    const httplib::Result result = Post(refused.path, refused.body);
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, refused.status) << refused.body << ": " << result->body;
    const json error = json::parse(result->body)["error"];
    EXPECT_FALSE(error["message"].get<std::string>().empty());
    EXPECT_EQ(error["code"], refused.status);
    EXPECT_EQ(error["param"], refused.param.empty() ? json(nullptr) : json(refused.param))
        << result->body;
  }
  const httplib::Result unknown = Client().Get("/v1/engines");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(json::parse(unknown->body)["error"]["type"], "invalid_request_error");
  EXPECT_THAT(metrics::Exposition(registry_),
              ::testing::Not(HasSubstr("specd_request_success_total{")));
}

TEST_F(OpenAiServerTest, TheApiKeyGuardsEveryPathButHealth) {
  Serve(/*api_key=*/"sesame");
  const json body = {{"prompt", "x"}, {"max_tokens", 2}};
  for (const httplib::Headers& headers :
       {httplib::Headers{}, httplib::Headers{{"Authorization", "Bearer open"}},
        httplib::Headers{{"Authorization", "sesame"}}}) {
    const httplib::Result refused = Post("/v1/completions", body, headers);
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 401);
    EXPECT_EQ(json::parse(refused->body)["error"]["type"], "authentication_error");
    EXPECT_EQ(Client().Get("/v1/models", headers)->status, 401);
  }
  EXPECT_THAT(metrics::Exposition(registry_),
              ::testing::Not(HasSubstr("specd_request_success_total{")));
  const httplib::Headers key = {{"Authorization", "Bearer sesame"}};
  EXPECT_EQ(Post("/v1/completions", body, key)->status, 200);
  const httplib::Result models = Client().Get("/v1/models", key);
  ASSERT_TRUE(models);
  ASSERT_EQ(models->status, 200);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "test");
  EXPECT_EQ(Client().Get("/health")->status, 200);
}

TEST_F(OpenAiServerTest, BeyondTheQueueARequestIs429) {
  Serve("", /*max_running=*/1, /*max_waiting=*/0);
  std::atomic<bool> first_chunk = false;
  std::atomic<bool> stop = false;
  std::thread long_request([&] {
    PostReading({{"prompt", "x"}, {"max_tokens", 4000}, {"ignore_eos", true}, {"stream", true}},
                [&] {
                  first_chunk = true;
                  return !stop;
                });
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!first_chunk && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!first_chunk) {
    stop = true;
    long_request.join();
    FAIL() << "the first request never streamed";
  }
  const httplib::Result refused = Post("/v1/completions", {{"prompt", "y"}, {"max_tokens", 2}});
  stop = true;
  long_request.join();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 429) << refused->body;
  EXPECT_EQ(json::parse(refused->body)["error"]["type"], "rate_limit_error");
}

TEST_F(OpenAiServerTest, AClientThatGoesAwayAbortsItsRequestStreamedOrNot) {
  Serve();
  // A stream whose reader stops after its first chunk: the connection closes.
  PostReading({{"prompt", "x"}, {"max_tokens", 4000}, {"ignore_eos", true}, {"stream", true}},
              [] { return false; });
  EXPECT_TRUE(MetricsShowWithin(
      "specd_request_success_total{finished_reason=\"abort\",model=\"test\",regime=\"short\"} 1\n",
      std::chrono::seconds(10)))
      << metrics::Exposition(registry_);
  // A whole reply whose client stops waiting: it goes at the first heartbeat.
  PostReading({{"prompt", "x"}, {"max_tokens", 4000}, {"ignore_eos", true}}, [] { return false; });
  EXPECT_TRUE(MetricsShowWithin(
      "specd_request_success_total{finished_reason=\"abort\",model=\"test\",regime=\"short\"} 2\n",
      std::chrono::seconds(10)))
      << metrics::Exposition(registry_);
  EXPECT_TRUE(
      MetricsShowWithin("specd_num_requests_running{model=\"test\"} 0\n", std::chrono::seconds(5)));
}

}  // namespace
}  // namespace specd::openai
