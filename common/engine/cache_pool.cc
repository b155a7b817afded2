#include "common/engine/cache_pool.h"

#include <algorithm>
#include <fstream>
#include <memory>
#include <string>
#include <utility>

namespace specd::engine {
namespace {

CachePoolUse UseOf(int64_t capacity, const AdmissionCounts& counts) {
  return {.capacity_bytes = capacity,
          .used_bytes = counts.used,
          .sequences = counts.holders,
          .waiting = counts.waiting};
}

// The first number of the line of `path` that starts with `key` (0 when there is none).
int64_t ReadNumber(const std::string& path, const std::string& key) {
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line)) {
    if (!line.starts_with(key)) continue;
    const size_t digits = line.find_first_of("0123456789", key.size());
    return digits == std::string::npos ? 0 : std::stoll(line.substr(digits));
  }
  return 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CachePool>> CachePool::Create(
    const CachePoolOptions& options, std::function<void(const CachePoolUse&)> on_change) {
  if (options.budget_bytes < 1 || options.block_tokens < 1 || options.max_waiting < 0) {
    return absl::InvalidArgumentError(
        "a cache pool needs a positive budget and block, and max_waiting ≥ 0");
  }
  return std::unique_ptr<CachePool>(new CachePool(options, std::move(on_change)));
}

CachePool::CachePool(const CachePoolOptions& options,
                     std::function<void(const CachePoolUse&)> on_change)
    : block_tokens_(options.block_tokens),
      bytes_(options.budget_bytes, options.max_waiting, "bytes of cache memory",
             [capacity = options.budget_bytes,
              on_change = std::move(on_change)](const AdmissionCounts& counts) {
               if (on_change) on_change(UseOf(capacity, counts));
             }) {}

int64_t CachePool::BytesFor(const model::CacheFootprint& footprint, int64_t tokens) const {
  const int64_t blocks = (tokens + block_tokens_ - 1) / block_tokens_;
  return footprint.Bytes(blocks * block_tokens_);
}

absl::StatusOr<CachePool::Reservation> CachePool::Reserve(const model::CacheFootprint& footprint,
                                                          int64_t tokens,
                                                          const std::function<bool()>& cancelled) {
  return bytes_.Admit(BytesFor(footprint, tokens), cancelled);
}

absl::StatusOr<CachePool::Reservation> CachePool::TryReserve(const model::CacheFootprint& footprint,
                                                             int64_t tokens) {
  return bytes_.TryAdmit(BytesFor(footprint, tokens));
}

CachePoolUse CachePool::use() const { return UseOf(bytes_.capacity(), bytes_.counts()); }

int64_t DefaultCacheBudget() {
  int64_t available = ReadNumber("/proc/meminfo", "MemAvailable:") * 1024;
  // cgroup v2: "max" (no limit) reads as 0.
  const int64_t limit = ReadNumber("/sys/fs/cgroup/memory.max", "");
  if (limit > 0) {
    available = std::min(available, limit - ReadNumber("/sys/fs/cgroup/memory.current", ""));
  }
  return std::max<int64_t>(available / 2, 1);
}

}  // namespace specd::engine
