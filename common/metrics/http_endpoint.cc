#include "common/metrics/http_endpoint.h"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace specd::metrics {

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const Registry& registry,
                                                                        const std::string& host,
                                                                        int port) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("metrics port ", port, " is outside 0..65535"));
  }
  auto server = std::make_unique<httplib::Server>();
  // Scrapes come seconds apart from one or two Prometheus servers: two workers are plenty, and
  // fewer threads means a faster, quieter shutdown.
  server->new_task_queue = [] { return new httplib::ThreadPool(2); };
  // httplib's workers only notice stop() between requests, and an idle keep-alive connection
  // holds one for up to 5 s. One request per connection (Prometheus reconnects each scrape,
  // seconds apart) and a 1 s wait for a silent client keep the destructor prompt.
  server->set_keep_alive_max_count(1);
  server->set_keep_alive_timeout(1);
  // httplib's default sets SO_REUSEPORT, which would let a second process bind the same port and
  // take half the scrapes; SO_REUSEADDR alone still allows a quick restart past TIME_WAIT.
  server->set_socket_options([](socket_t socket) {
    const int yes = 1;
    setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server->Get("/metrics", [&registry](const httplib::Request&, httplib::Response& response) {
    response.set_content(registry.Exposition(), kExpositionContentType);
  });
  const int bound_port =
      port == 0 ? server->bind_to_any_port(host) : (server->bind_to_port(host, port) ? port : -1);
  if (bound_port <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", host, ":", port,
                                               ": binding the address failed (in use, or the "
                                               "host is not a local address)"));
  }
  return std::unique_ptr<MetricsEndpoint>(new MetricsEndpoint(std::move(server), bound_port));
}

MetricsEndpoint::MetricsEndpoint(std::unique_ptr<httplib::Server> server, int port)
    : server_(std::move(server)), port_(port) {
  thread_ = std::thread([this] {
    server_->listen_after_bind();
    listen_returned_ = true;
  });
  // stop() only acts on a running server, so wait until the accept loop has started before
  // handing the endpoint out; otherwise an early destructor would join a thread that never ends.
  while (!server_->is_running() && !listen_returned_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

MetricsEndpoint::~MetricsEndpoint() {
  server_->stop();
  thread_.join();
}

}  // namespace specd::metrics
