#pragma once
// An HTTP server on cpp-httplib running on its own threads: bound at Start (port 0 picks a free
// one), serving until destroyed. Every HTTP endpoint of specd (the /metrics scrape, the OpenAI
// API) is one, so binding, shutdown and TLS are decided here once.
#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace specd::http {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  // Requests served at once; more wait for a thread.
  int threads = 2;
  // Requests per connection, and how long an idle keep-alive connection is held. httplib's
  // workers notice stop() only between requests, so the timeout bounds how long shutdown waits
  // for an idle client.
  int keep_alive_requests = 1;
  int keep_alive_timeout_s = 1;
  // HTTPS with this certificate chain and key (PEM); with client_ca too, only clients whose
  // certificate it signs. Empty: plain HTTP.
  std::filesystem::path tls_cert;
  std::filesystem::path tls_key;
  std::filesystem::path tls_client_ca;
};

class HttpServer {
 public:
  // Binds options.host:port, lets `routes` install the handlers, and serves in the background.
  // Fails when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      const HttpServerOptions& options, const std::function<void(httplib::Server&)>& routes);

  int port() const { return port_; }
  // Stops accepting, lets the requests in progress end, and joins the threads; the port is free
  // once this returns.
  ~HttpServer();

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

 private:
  HttpServer(std::unique_ptr<httplib::Server> server, int port);

  std::unique_ptr<httplib::Server> server_;
  int port_;
  std::atomic<bool> listen_returned_ = false;
  std::thread thread_;
};

}  // namespace specd::http
