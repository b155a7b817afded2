#pragma once
// Caches are preallocated for a length and reused across requests: a decoder or drafter keeps one
// and replaces it only when a request needs more room.
#include <cstdint>
#include <optional>
#include <utility>

#include "absl/status/statusor.h"

namespace specd::engine {

// `cache` if it holds `length` positions, else a new one from `owner.NewCache(length)` (a
// Qwen35Model or a DFlashDrafter) in its place. Not reset: the caller starts it over.
template <typename Owner, typename Cache>
absl::StatusOr<Cache*> CacheFor(const Owner& owner, std::optional<Cache>& cache, int64_t length) {
  if (!cache.has_value() || cache->max_length() < length) {
    cache.reset();  // free the old one before allocating its successor
    absl::StatusOr<Cache> fresh = owner.NewCache(length);
    if (!fresh.ok()) return fresh.status();
    cache.emplace(*std::move(fresh));
  }
  return &*cache;
}

}  // namespace specd::engine
