#pragma once
// A process's TLS, from PEM files: the certificate it serves with (gRPC and the HTTP API) and
// presents as a client (mutual TLS between roles), the roots it requires client certificates
// to chain to, and the roots it trusts servers by. Without files everything is plain text.
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace specd::rpc {

struct TlsFiles {
  std::filesystem::path cert;       // certificate chain; with `key`: serve TLS
  std::filesystem::path key;        // its private key
  std::filesystem::path client_ca;  // serving: only clients whose certificate these sign
  std::filesystem::path ca;         // connecting: the roots of the servers' certificates
  // Connecting: the name the server's certificate must carry; empty: the host connected to. A
  // server reached by address (a pod IP found through DNS) is checked against a stable name.
  std::string server_name;

  bool serves() const { return !cert.empty(); }
  // A cert without its key (or the reverse), client_ca without a cert to serve with, or
  // server_name without the ca to check it by.
  absl::Status Check() const;
};

// TLS (mutual with client_ca) when `tls` serves, plain text otherwise. Fails on an unreadable file.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsOf(const TlsFiles& tls);
// TLS trusting `ca` (and presenting cert and key, if given) when it is set, plain text otherwise.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsOf(const TlsFiles& tls);

}  // namespace specd::rpc
