#pragma once
// An HTTP server that answers GET /metrics with a Registry's Prometheus exposition, for
// Prometheus to scrape. Runs on its own threads; other paths get 404.
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/metrics/registry.h"

namespace httplib {
class Server;
}

namespace specd::metrics {

class MetricsEndpoint {
 public:
  // Binds host:port (port 0 picks a free port) and serves in a background thread. `registry`
  // must outlive the endpoint. Fails when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(const Registry& registry,
                                                                const std::string& host, int port);

  int port() const { return port_; }
  // Stops the server and joins its thread; the port is free once this returns.
  ~MetricsEndpoint();

  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

 private:
  MetricsEndpoint(std::unique_ptr<httplib::Server> server, int port);

  std::unique_ptr<httplib::Server> server_;
  int port_;
  std::atomic<bool> listen_returned_ = false;
  std::thread thread_;
};

// The Content-Type of Prometheus text format 0.0.4.
inline constexpr char kExpositionContentType[] = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace specd::metrics
