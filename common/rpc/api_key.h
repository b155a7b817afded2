#pragma once
// The key a server's public APIs require: `Authorization: Bearer <key>` on HTTP, `authorization:
// Bearer <key>` metadata on the public gRPC services (generation, trainer). Each call's first
// step is the check, so a call without the key runs nothing. Health, reflection and the role-to-
// role services stay open to the key (mutual TLS guards those).
#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <string>
#include <string_view>

namespace specd::rpc {

class ApiKey {
 public:
  // Empty: no key, every call is admitted.
  explicit ApiKey(std::string key = "") : key_(std::move(key)) {}

  bool required() const { return !key_.empty(); }
  // Whether an Authorization value admits the call, in a time that does not depend on how much
  // of a wrong key was right.
  bool Admits(std::string_view authorization) const;
  // OK, or UNAUTHENTICATED for a call whose metadata lacks the key.
  grpc::Status Check(const grpc::ServerContext& context) const;

 private:
  std::string key_;
};

}  // namespace specd::rpc
