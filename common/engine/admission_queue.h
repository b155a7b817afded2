#pragma once
// A capacity shared in arrival order: each request takes some units of it (one request slot, or
// the bytes of a session's caches) and holds them until its ticket goes. At most max_waiting
// wait, first come first served; anything beyond, or asking for more than the whole capacity, is
// refused with RESOURCE_EXHAUSTED at once, so an overloaded server answers quickly instead of
// queueing without bound. The orchestrator admits requests with one; a CachePool admits sessions.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>

#include "absl/status/statusor.h"

namespace specd::engine {

struct AdmissionCounts {
  int64_t used = 0;     // units held by tickets
  int64_t holders = 0;  // tickets held
  int64_t waiting = 0;  // requests waiting
};

class AdmissionQueue {
 public:
  // `on_change` (may be empty) sees the counts after every change, under the queue's lock;
  // `unit` names the units in refusals ("slots", "bytes").
  AdmissionQueue(int64_t capacity, int64_t max_waiting, std::string unit,
                 std::function<void(const AdmissionCounts&)> on_change = {});

  // Units taken, given back when the ticket is destroyed.
  class Ticket {
   public:
    Ticket(Ticket&& other) noexcept : queue_(other.queue_), units_(other.units_) {
      other.queue_ = nullptr;
    }
    Ticket& operator=(Ticket&&) = delete;
    ~Ticket();

   private:
    friend class AdmissionQueue;
    Ticket(AdmissionQueue* queue, int64_t units) : queue_(queue), units_(units) {}
    AdmissionQueue* queue_;
    int64_t units_;
  };

  // Waits until `units` (≥ 1) are free and every earlier request has been served.
  // RESOURCE_EXHAUSTED when max_waiting requests are already waiting or `units` exceed the
  // capacity; CANCELLED once `cancelled()` (checked while waiting) is true; UNAVAILABLE after
  // Close.
  absl::StatusOr<Ticket> Admit(int64_t units, const std::function<bool()>& cancelled);
  // The units if they are free now and nobody waits; RESOURCE_EXHAUSTED otherwise (or after
  // Close, UNAVAILABLE).
  absl::StatusOr<Ticket> TryAdmit(int64_t units);

  // Refuses every waiting and later request (shutdown); tickets held stay valid.
  void Close();

  int64_t capacity() const { return capacity_; }
  AdmissionCounts counts() const;

 private:
  void Leave(int64_t units);
  void Changed();  // under mutex_

  const int64_t capacity_;
  const int64_t max_waiting_;
  const std::string unit_;
  const std::function<void(const AdmissionCounts&)> on_change_;
  mutable std::mutex mutex_;
  std::condition_variable units_freed_;
  AdmissionCounts counts_;
  uint64_t next_ticket_ = 0;     // arrival order of waiting requests
  uint64_t serving_ticket_ = 0;  // the first waiting request that may take free units
  std::set<uint64_t> skipped_;   // tickets that left the line before their turn
  bool closed_ = false;
};

}  // namespace specd::engine
