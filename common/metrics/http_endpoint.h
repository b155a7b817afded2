#pragma once
// An HTTP server that answers GET /metrics with the Prometheus exposition of a collectable (the
// process's prometheus::Registry), for Prometheus to scrape. A common/http server like every HTTP
// endpoint of specd, rather than prometheus-cpp's Exposer (civetweb): one HTTP stack in the
// process. Runs on its own threads; other paths get 404.
#include <prometheus/collectable.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/http/http_server.h"

namespace specd::metrics {

class MetricsEndpoint {
 public:
  // Binds host:port (port 0 picks a free port) and serves in a background thread. `metrics` must
  // outlive the endpoint. Fails when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const prometheus::Collectable& metrics, const std::string& host, int port);

  int port() const { return server_->port(); }

 private:
  explicit MetricsEndpoint(std::unique_ptr<http::HttpServer> server) : server_(std::move(server)) {}

  std::unique_ptr<http::HttpServer> server_;  // stops and frees the port when destroyed
};

}  // namespace specd::metrics
