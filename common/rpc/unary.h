#pragma once
// The two ends of a unary gRPC call over handlers that speak absl::StatusOr: a client call with a
// deadline whose failure comes back as a status, and a server reply from a handler's result.
#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>

#include <chrono>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpc/status.h"

namespace specd::rpc {

// Runs `call(&context, &response)` (a stub method bound to its request) with `timeout`.
template <typename Response, typename Call>
absl::StatusOr<Response> CallUnary(absl::Duration timeout, Call&& call) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout));
  Response response;
  const grpc::Status status = std::forward<Call>(call)(&context, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

// Moves a handler's response into gRPC's, or turns its error into the call's status.
template <typename Response>
grpc::Status Reply(absl::StatusOr<Response> result, Response* response) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

}  // namespace specd::rpc
