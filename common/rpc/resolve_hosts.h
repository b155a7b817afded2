#pragma once
// The addresses a host name stands for now, as gRPC targets take them: how an orchestrator finds
// the pods behind a Kubernetes headless Service (one A or AAAA record per ready pod).
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace specd::rpc {

// Every address of `name`, sorted and without repeats; IPv6 ones in brackets ("[::1]"), so that
// ":PORT" can follow. NOT_FOUND when the name resolves to nothing.
absl::StatusOr<std::vector<std::string>> ResolveHosts(const std::string& name);

}  // namespace specd::rpc
