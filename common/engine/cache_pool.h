#pragma once
// The memory of every session's caches in one process, under one budget: the verifier's target
// sessions (with their context buffers), the drafter's, an in-process pair's — in `serve --role
// all` they share one pool. Before it allocates, a session reserves what its longest sequence
// takes (its fixed state, and its tokens in whole blocks, so sequences of any length share the
// budget without small ones paying for long ones) and holds it until it closes, so a running
// request never runs out of memory. A session that does not fit waits for others to close, first
// come first served; past the waiting bound, or larger than the whole budget, it is refused with
// RESOURCE_EXHAUSTED.
#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "common/engine/admission_queue.h"
#include "common/model/cache_footprint.h"

namespace specd::engine {

struct CachePoolOptions {
  int64_t budget_bytes = 0;
  int64_t block_tokens = 16;  // sequences reserve their tokens in blocks of this many
  int64_t max_waiting = 64;   // sessions waiting for memory; beyond: RESOURCE_EXHAUSTED
};

struct CachePoolUse {
  int64_t capacity_bytes = 0;
  int64_t used_bytes = 0;
  int64_t sequences = 0;  // reservations held
  int64_t waiting = 0;
};

class CachePool {
 public:
  using Reservation = AdmissionQueue::Ticket;

  // INVALID_ARGUMENT unless the budget and block are positive and max_waiting ≥ 0. `on_change`
  // (may be empty) sees the use after every change.
  static absl::StatusOr<std::unique_ptr<CachePool>> Create(
      const CachePoolOptions& options, std::function<void(const CachePoolUse&)> on_change = {});

  // What a sequence of up to `tokens` tokens with `footprint` reserves.
  int64_t BytesFor(const model::CacheFootprint& footprint, int64_t tokens) const;

  // Waits for that memory (CANCELLED once `cancelled()`; AdmissionQueue::Admit).
  absl::StatusOr<Reservation> Reserve(const model::CacheFootprint& footprint, int64_t tokens,
                                      const std::function<bool()>& cancelled);
  // The memory if it is free now, else RESOURCE_EXHAUSTED: for a part of a request that can go
  // on without it (a drafter session: the request falls back to target-only).
  absl::StatusOr<Reservation> TryReserve(const model::CacheFootprint& footprint, int64_t tokens);

  CachePoolUse use() const;

 private:
  CachePool(const CachePoolOptions& options, std::function<void(const CachePoolUse&)> on_change);

  const int64_t block_tokens_;
  AdmissionQueue bytes_;
};

// The budget `serve` takes by default on the CPU: half the memory available to this process now
// (the machine's, or its cgroup's limit where that is lower), after the weights are loaded.
int64_t DefaultCacheBudget();

}  // namespace specd::engine
