#include "cli/specctl/client_options.h"

#include <chrono>
#include <iostream>

#include "common/rpc/grpc_server.h"
#include "common/rpc/status.h"

namespace specd::specctl {
namespace {

constexpr double kDefaultTimeoutSeconds = 30;

}  // namespace

void AddClientOptions(CLI::App& app, ClientOptions& options) {
  app.add_option("--addr", options.address, "the server, HOST:PORT")
      ->envname("SPECCTL_ADDR")
      ->capture_default_str();
  app.add_option("--timeout", options.timeout_seconds,
                 "deadline of each call in seconds (default 30; none for a followed stream)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--api-key", options.api_key, "the server's API key, if it requires one")
      ->envname("SPECD_API_KEY");
  app.add_option("--tls-ca", options.tls.ca,
                 "connect over TLS, trusting servers whose certificate these PEM roots sign");
  app.add_option("--tls-cert", options.tls.cert,
                 "with --tls-ca: this client's PEM certificate, for servers that ask (mutual TLS)");
  app.add_option("--tls-key", options.tls.key, "the PEM private key of --tls-cert");
  app.add_option("--tls-server-name", options.tls.server_name,
                 "with --tls-ca: the name the server's certificate must carry (default: the "
                 "host of --addr)");
}

std::shared_ptr<grpc::Channel> Connect(const ClientOptions& options) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      rpc::ChannelCredentialsOf(options.tls);
  ExitOnError(credentials.status());
  return rpc::Connect(options.address, *credentials, options.tls.server_name);
}

void ConfigureCall(grpc::ClientContext& context, const ClientOptions& options, bool streaming) {
  if (!options.api_key.empty()) context.AddMetadata("authorization", "Bearer " + options.api_key);
  double seconds = options.timeout_seconds;
  if (seconds == 0 && !streaming) seconds = kDefaultTimeoutSeconds;
  if (seconds == 0) return;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6)));
}

void ExitOnError(const grpc::Status& status) {
  if (status.ok()) return;
  std::cerr << "specctl: " << rpc::StatusCodeName(status.error_code()) << ": "
            << status.error_message() << "\n";
  throw CLI::RuntimeError(1);
}

void ExitOnError(const absl::Status& status) { ExitOnError(rpc::ToGrpcStatus(status)); }

}  // namespace specd::specctl
