#pragma once
// A random id for one run of a server process (Info's instance_id): a restarted server gets a new
// one, so its clients know every session and handle of the old one is gone.
#include <random>
#include <string>

#include "absl/strings/str_format.h"

namespace specd::rpc {

inline std::string NewInstanceId() {
  std::random_device random;
  return absl::StrFormat("%08x%08x", random(), random());
}

}  // namespace specd::rpc
