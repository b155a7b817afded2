#pragma once
// How every specd process serves gRPC — its services plus the standard health service
// (grpc.health.v1, one entry per service name) and server reflection, and a count of every
// handled call by method and status code (`specd_grpc_server_handled_total`) — and how it
// reaches another one.
#include <grpcpp/channel.h>
#include <grpcpp/server.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/rpc/tls.h"

namespace specd::rpc {

struct GrpcServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;  // the port bound (the one asked for, or the one picked for port 0)
};

// Listens on `address` ("HOST:PORT"; port 0 picks one). `services` must outlive the server;
// `health_names` are the service names the health service reports, with "" (the whole server):
// SERVING, or NOT_SERVING until SetServing when `serving` is false (a server still waiting for
// what it needs). TLS when `tls` serves (mutual with its client_ca).
absl::StatusOr<GrpcServer> StartGrpcServer(const std::string& address,
                                           const std::vector<grpc::Service*>& services,
                                           const std::vector<std::string>& health_names,
                                           prometheus::Registry& registry, bool serving = true,
                                           const TlsFiles& tls = {});

// Reports every name of `server`'s health service as SERVING or NOT_SERVING (a draining server).
void SetServing(grpc::Server& server, bool serving);

// A channel to the specd process at `address` ("HOST:PORT"): plain text unless `credentials`
// (ChannelCredentialsOf) say TLS, whose server certificate must then name `server_name` (empty:
// the host of `address`; TlsFiles::server_name).
std::shared_ptr<grpc::Channel> Connect(const std::string& address,
                                       const std::shared_ptr<grpc::ChannelCredentials>&
                                           credentials = grpc::InsecureChannelCredentials(),
                                       const std::string& server_name = "");

}  // namespace specd::rpc
