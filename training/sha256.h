#pragma once
// SHA-256 as lowercase hex: the checksum of packed shards and of the training corpus.
#include <cstddef>
#include <span>
#include <string>

namespace specd::train {

std::string Sha256Hex(std::span<const std::byte> bytes);

}  // namespace specd::train
