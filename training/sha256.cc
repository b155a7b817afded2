#include "training/sha256.h"

#include <openssl/sha.h>

#include <array>

#include "absl/strings/str_format.h"

namespace specd::train {

std::string Sha256Hex(std::span<const std::byte> bytes) {
  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest;
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest.data());
  std::string hex;
  for (const unsigned char byte : digest) absl::StrAppendFormat(&hex, "%02x", byte);
  return hex;
}

}  // namespace specd::train
