#include "common/metrics/http_endpoint.h"

#include <httplib.h>

#include "common/metrics/exposition.h"

namespace specd::metrics {

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const prometheus::Collectable& metrics, const std::string& host, int port) {
  // Scrapes come seconds apart from one or two Prometheus servers: two workers are plenty, and
  // one request per connection (Prometheus reconnects each scrape) keeps shutdown prompt.
  http::HttpServerOptions listening;
  listening.host = host;
  listening.port = port;
  listening.threads = 2;
  listening.keep_alive_requests = 1;
  listening.keep_alive_timeout_s = 1;
  absl::StatusOr<std::unique_ptr<http::HttpServer>> server =
      http::HttpServer::Start(listening, [&metrics](httplib::Server& routes) {
        routes.Get("/metrics", [&metrics](const httplib::Request&, httplib::Response& response) {
          response.set_content(Exposition(metrics), kExpositionContentType);
        });
      });
  if (!server.ok()) return server.status();
  return std::unique_ptr<MetricsEndpoint>(new MetricsEndpoint(*std::move(server)));
}

}  // namespace specd::metrics
