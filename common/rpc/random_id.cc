#include "common/rpc/random_id.h"

#include <random>

#include "absl/strings/str_format.h"

namespace specd::rpc {

std::string RandomHex(int bytes) {
  std::random_device random;
  std::string hex;
  for (int i = 0; i < bytes; ++i) absl::StrAppendFormat(&hex, "%02x", random() & 0xff);
  return hex;
}

}  // namespace specd::rpc
