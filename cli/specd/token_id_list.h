#pragma once
// Token ids given on the command line as "1,2,3".
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace specd::cli {

// Fails, naming `flag`, on a field that is not an integer or on an empty list.
absl::StatusOr<std::vector<int64_t>> ParseIdList(const std::string& list, const std::string& flag);

}  // namespace specd::cli
