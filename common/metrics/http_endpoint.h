#pragma once
// An HTTP server that answers GET /metrics with a Registry's Prometheus exposition, for
// Prometheus to scrape. Runs on its own threads; other paths get 404.
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/http/http_server.h"
#include "common/metrics/registry.h"

namespace specd::metrics {

class MetricsEndpoint {
 public:
  // Binds host:port (port 0 picks a free port) and serves in a background thread. `registry`
  // must outlive the endpoint. Fails when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(const Registry& registry,
                                                                const std::string& host, int port);

  int port() const { return server_->port(); }

 private:
  explicit MetricsEndpoint(std::unique_ptr<http::HttpServer> server) : server_(std::move(server)) {}

  std::unique_ptr<http::HttpServer> server_;  // stops and frees the port when destroyed
};

// The Content-Type of Prometheus text format 0.0.4.
inline constexpr char kExpositionContentType[] = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace specd::metrics
