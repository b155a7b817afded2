#include "services/openai/openai_server.h"

#include <httplib.h>

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "services/openai/generation_run.h"
#include "services/openai/openai_reply.h"
#include "services/openai/openai_request.h"

namespace specd::openai {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// With the charset named, httplib leaves a reply uncompressed (it compresses the bare
// "application/json"): a compressor would hold back a whole reply's heartbeat spaces, and with
// them the writes that notice a client gone.
constexpr char kJson[] = "application/json; charset=utf-8";

void SendError(httplib::Response& response, const absl::Status& status) {
  response.status = HttpStatusOf(status);
  response.set_content(Serialize(ErrorObject(status)), kJson);
}

bool Send(httplib::DataSink& sink, const std::string& data) {
  return sink.write(data.data(), data.size());
}

// A stream's events until the request ends, then `data: [DONE]`. False when the client is gone.
bool WriteEvents(GenerationRun& run, Reply& reply, bool include_usage, httplib::DataSink& sink) {
  v1::GenerateStreamResponse message;
  for (;;) {
    switch (run.Take(kHeartbeat, message)) {
      case GenerationRun::Next::kTimeout:
        continue;
      case GenerationRun::Next::kMessage:
        if (!Send(sink, absl::StrCat("data: ", Serialize(reply.Chunk(message)), "\n\n"))) {
          return false;
        }
        continue;
      case GenerationRun::Next::kEnded:
        break;
    }
    break;
  }
  // After the first event the status is sent: a later failure is an event of its own.
  if (const absl::Status status = run.status(); !status.ok()) {
    Send(sink, absl::StrCat("data: ", Serialize(ErrorObject(status)), "\n\n"));
  } else if (include_usage) {
    Send(sink, absl::StrCat("data: ", Serialize(reply.UsageChunk()), "\n\n"));
  }
  return Send(sink, "data: [DONE]\n\n");
}

// The whole response once the request ends, after a space every kHeartbeat until then. False
// when the client is gone.
bool WriteWhole(GenerationRun& run, Reply& reply, httplib::DataSink& sink) {
  v1::GenerateResponse whole;
  v1::GenerateStreamResponse message;
  Clock::time_point last_write = Clock::now();
  for (;;) {
    const GenerationRun::Next next = run.Take(kHeartbeat, message);
    if (next == GenerationRun::Next::kEnded) break;
    if (next == GenerationRun::Next::kMessage) orchestrator::MergeStreamMessage(message, whole);
    if (Clock::now() - last_write >= absl::ToChronoMilliseconds(kHeartbeat)) {
      if (!Send(sink, " ")) return false;
      last_write = Clock::now();
    }
  }
  const absl::Status status = run.status();
  return Send(sink, Serialize(status.ok() ? reply.Whole(whole) : ErrorObject(status)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<OpenAiServer>> OpenAiServer::Start(
    orchestrator::GenerationHandler& handler, const text::Tokenizer* tokenizer,
    OpenAiServerOptions options) {
  std::unique_ptr<OpenAiServer> api(new OpenAiServer(handler, tokenizer, std::move(options)));
  OpenAiServer* self = api.get();
  http::HttpServerOptions listening = self->options_.http;
  // Clients keep their connections (the openai client pools them); an idle one holds a thread
  // at shutdown for at most the timeout.
  listening.keep_alive_requests = 1000;
  listening.keep_alive_timeout_s = 2;
  absl::StatusOr<std::unique_ptr<http::HttpServer>> server =
      http::HttpServer::Start(listening, [self](httplib::Server& routes) {
        routes.set_pre_routing_handler([self](const httplib::Request& request,
                                              httplib::Response& response) {
          if (request.path == "/health" || self->Authorized(request)) {
            return httplib::Server::HandlerResponse::Unhandled;
          }
          SendError(response, absl::UnauthenticatedError("a valid API key is required: send it as "
                                                         "`Authorization: Bearer <key>`"));
          return httplib::Server::HandlerResponse::Handled;
        });
        routes.Get("/health", [self](const httplib::Request&, httplib::Response& response) {
          self->Health(response);
        });
        routes.Get("/v1/models", [self](const httplib::Request&, httplib::Response& response) {
          self->Models(response);
        });
        routes.Post("/v1/completions",
                    [self](const httplib::Request& request, httplib::Response& response) {
                      self->Generate(Endpoint::kCompletions, request, response);
                    });
        routes.Post("/v1/chat/completions",
                    [self](const httplib::Request& request, httplib::Response& response) {
                      self->Generate(Endpoint::kChatCompletions, request, response);
                    });
        // Unknown paths and methods get an error object too, not an empty body.
        routes.set_error_handler([](const httplib::Request& request, httplib::Response& response) {
          if (!response.body.empty()) return;
          const int status = response.status;
          SendError(response, absl::NotFoundError(
                                  absl::StrCat("no route ", request.method, " ", request.path)));
          response.status = status;
        });
      });
  if (!server.ok()) return server.status();
  api->server_ = *std::move(server);
  return api;
}

bool OpenAiServer::Authorized(const httplib::Request& request) const {
  return api_key_.Admits(request.get_header_value("Authorization"));
}

void OpenAiServer::Health(httplib::Response& response) {
  if (absl::StatusOr<v1::GetModelInfoResponse> info = handler_.GetModelInfo(); !info.ok()) {
    SendError(response, info.status());
    return;
  }
  response.set_content("", "text/plain");
}

void OpenAiServer::Models(httplib::Response& response) {
  absl::StatusOr<v1::GetModelInfoResponse> info = handler_.GetModelInfo();
  if (!info.ok()) {
    SendError(response, info.status());
    return;
  }
  const json model = {
      {"id", options_.model_name},    {"object", "model"},
      {"created", started_},          {"owned_by", "specd"},
      {"root", info->target_model()}, {"max_model_len", info->max_context_length()}};
  response.set_content(Serialize({{"object", "list"}, {"data", json::array({model})}}), kJson);
}

void OpenAiServer::Generate(Endpoint endpoint, const httplib::Request& http,
                            httplib::Response& response) {
  absl::StatusOr<OpenAiRequest> request = ParseRequest(endpoint, http.body);
  if (!request.ok()) return SendError(response, request.status());
  if (!request->model.empty() && request->model != options_.model_name) {
    return SendError(response, absl::NotFoundError(absl::StrCat("the model `", request->model,
                                                                "` does not exist: this server "
                                                                "serves `",
                                                                options_.model_name, "`")));
  }
  if (http.has_header("X-Request-Id")) {
    request->generate.set_request_id(http.get_header_value("X-Request-Id"));
  }
  auto run = std::make_shared<GenerationRun>(handler_, std::move(request->generate));
  // Until the request has produced something, what went wrong is the response's status.
  if (!run->Started()) return SendError(response, run->status());
  auto reply = std::make_shared<Reply>(endpoint, run->request_id(), options_.model_name, tokenizer_,
                                       request->include_usage);
  response.set_header("X-Request-Id", run->request_id());
  const bool stream = request->stream;
  const bool include_usage = request->include_usage;
  response.set_chunked_content_provider(
      stream ? "text/event-stream" : kJson,
      [run, reply, stream, include_usage](size_t, httplib::DataSink& sink) {
        const bool written = stream ? WriteEvents(*run, *reply, include_usage, sink)
                                    : WriteWhole(*run, *reply, sink);
        if (!written) {
          run->Cancel();
          return false;
        }
        sink.done();
        return true;
      },
      // However the response ends (a client gone mid-way included), the request stops.
      [run](bool) { run->Cancel(); });
}

}  // namespace specd::openai
