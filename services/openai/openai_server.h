#pragma once
// The OpenAI-compatible HTTP API on the orchestrator's GenerationHandler — the same handler, the
// same admission queue and metrics as the gRPC GenerationService, not a proxy in front of it:
//   GET  /v1/models            the served model
//   POST /v1/completions       legacy completions (prompt text or token ids)
//   POST /v1/chat/completions  chat, with the model's chat template
//   GET  /health               200 once a pair serves, 503 before
// Both POSTs stream as server-sent events with `"stream": true` (chunks, then `data: [DONE]`).
// Errors are OpenAI's error object with the HTTP status of their cause (400, 401, 404, 429, 503).
// A client that goes away aborts its request: a stream notices at its next chunk; a whole reply
// goes out chunked, its JSON preceded by a space every kHeartbeat so the write fails soon after
// the client has gone.
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/http/http_server.h"
#include "common/rpc/api_key.h"
#include "common/text/tokenizer.h"
#include "services/orchestrator/generation_handler.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace specd::openai {

enum class Endpoint;

inline constexpr absl::Duration kHeartbeat = absl::Milliseconds(250);

struct OpenAiServerOptions {
  // Where and how it listens: host, port, TLS, and threads — as many as the handler's running
  // plus waiting requests, so that its queue, not HTTP's, decides who waits and who gets 429,
  // and a few for /health and /v1/models. Keep-alive is the API's own.
  http::HttpServerOptions http;
  std::string model_name = "specd";  // what `model` must name; /v1/models lists it
  // Empty: no key. Otherwise every path but /health needs `Authorization: Bearer <key>`.
  std::string api_key;
};

class OpenAiServer {
 public:
  // Binds and serves in the background. `handler` and `tokenizer` (null: token ids only) must
  // outlive the server; the handler is shut down before it, so that no request is left running.
  static absl::StatusOr<std::unique_ptr<OpenAiServer>> Start(
      orchestrator::GenerationHandler& handler, const text::Tokenizer* tokenizer,
      OpenAiServerOptions options);

  int port() const { return server_->port(); }

 private:
  OpenAiServer(orchestrator::GenerationHandler& handler, const text::Tokenizer* tokenizer,
               OpenAiServerOptions options)
      : handler_(handler),
        tokenizer_(tokenizer),
        options_(std::move(options)),
        api_key_(options_.api_key),
        started_(static_cast<int64_t>(std::time(nullptr))) {}

  bool Authorized(const httplib::Request& request) const;
  void Models(httplib::Response& response);
  void Health(httplib::Response& response);
  void Generate(Endpoint endpoint, const httplib::Request& request, httplib::Response& response);

  orchestrator::GenerationHandler& handler_;
  const text::Tokenizer* tokenizer_;
  const OpenAiServerOptions options_;
  const rpc::ApiKey api_key_;
  const int64_t started_;  // Unix seconds: /v1/models' `created`
  std::unique_ptr<http::HttpServer> server_;
};

}  // namespace specd::openai
