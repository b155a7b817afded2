#pragma once
// Conversions between gRPC and Abseil statuses at service boundaries (the codes are numerically
// the same; messages are kept), and the canonical name of a code for CLIs and metric labels.
#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace specd::rpc {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// `status` with the name of the request field it is about in front of its message
// ("draft_token_ids: token id 5 is outside …"), for engine errors a service passes on.
absl::Status AtField(absl::string_view field, const absl::Status& status);

// The canonical upper-case name of a code ("INVALID_ARGUMENT"); "UNKNOWN" for a value outside
// the 17 codes, as gRPC itself treats such values.
std::string StatusCodeName(grpc::StatusCode code);

}  // namespace specd::rpc
