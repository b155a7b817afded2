#pragma once
// What every specctl command shares: where the server is, each call's deadline and API key, and
// how an error ends the program ("specctl: CODE_NAME: message" on stderr, exit status 1).
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "common/rpc/tls.h"

namespace specd::specctl {

struct ClientOptions {
  std::string address = "localhost:50051";
  // Seconds per call; 0: the default, 30 s, and no deadline for a followed stream.
  double timeout_seconds = 0;
  // Sent as `authorization: Bearer <key>` metadata; empty: none.
  std::string api_key;
  // TLS when tls.ca is set (with tls.cert and tls.key, mutual); plain text otherwise.
  rpc::TlsFiles tls;
};

// Adds --addr (or $SPECCTL_ADDR), --timeout, --api-key (or $SPECD_API_KEY) and the TLS files
// to the top-level command.
void AddClientOptions(CLI::App& app, ClientOptions& options);

// A channel to the server; ends the command when a TLS file cannot be read.
std::shared_ptr<grpc::Channel> Connect(const ClientOptions& options);

// Sets the call's deadline from the options (`streaming` calls have none unless --timeout says)
// and its API key.
void ConfigureCall(grpc::ClientContext& context, const ClientOptions& options,
                   bool streaming = false);

// Returns if `status` is OK; otherwise prints it and ends the command with exit status 1.
void ExitOnError(const grpc::Status& status);
void ExitOnError(const absl::Status& status);

}  // namespace specd::specctl
