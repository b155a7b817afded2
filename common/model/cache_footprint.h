#pragma once
// The memory one sequence's caches take: a part fixed per sequence (Gated DeltaNet states) and a
// part per token it may hold (keys and values). A CachePool admits sessions by it.
#include <cstdint>

namespace specd::model {

struct CacheFootprint {
  int64_t fixed_bytes = 0;
  int64_t bytes_per_token = 0;

  int64_t Bytes(int64_t tokens) const { return fixed_bytes + bytes_per_token * tokens; }
  CacheFootprint operator+(const CacheFootprint& other) const {
    return {fixed_bytes + other.fixed_bytes, bytes_per_token + other.bytes_per_token};
  }
};

}  // namespace specd::model
