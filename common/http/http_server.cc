#include "common/http/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace specd::http {

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const HttpServerOptions& options, const std::function<void(httplib::Server&)>& routes) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP port ", options.port, " is outside 0..65535"));
  }
  std::unique_ptr<httplib::Server> server;
  if (options.tls_cert.empty()) {
    server = std::make_unique<httplib::Server>();
  } else {
    const std::string client_ca = options.tls_client_ca.string();
    auto secure =
        std::make_unique<httplib::SSLServer>(options.tls_cert.c_str(), options.tls_key.c_str(),
                                             client_ca.empty() ? nullptr : client_ca.c_str());
    if (!secure->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot serve HTTPS with ", options.tls_cert.string(), " and ", options.tls_key.string(),
          client_ca.empty() ? "" : absl::StrCat(" (clients by ", client_ca, ")"),
          ": unreadable, or not a matching PEM certificate and key"));
    }
    server = std::move(secure);
  }
  const int threads = options.threads;
  server->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server->set_keep_alive_max_count(options.keep_alive_requests);
  server->set_keep_alive_timeout(options.keep_alive_timeout_s);
  // httplib's default sets SO_REUSEPORT, which would let a second process bind the same port and
  // take half the requests; SO_REUSEADDR alone still allows a quick restart past TIME_WAIT.
  server->set_socket_options([](socket_t socket) {
    const int yes = 1;
    setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  routes(*server);
  const int bound_port =
      options.port == 0 ? server->bind_to_any_port(options.host)
                        : (server->bind_to_port(options.host, options.port) ? options.port : -1);
  if (bound_port <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve HTTP on ", options.host, ":",
                                               options.port,
                                               ": binding the address failed (in use, or the "
                                               "host is not a local address)"));
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(server), bound_port));
}

HttpServer::HttpServer(std::unique_ptr<httplib::Server> server, int port)
    : server_(std::move(server)), port_(port) {
  thread_ = std::thread([this] {
    server_->listen_after_bind();
    listen_returned_ = true;
  });
  // stop() only acts on a running server, so wait until the accept loop has started before
  // handing the server out; otherwise an early destructor would join a thread that never ends.
  while (!server_->is_running() && !listen_returned_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

HttpServer::~HttpServer() {
  server_->stop();
  thread_.join();
}

}  // namespace specd::http
