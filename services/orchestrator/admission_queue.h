#pragma once
// Admission of generation requests: at most max_running generate at once, at most max_waiting
// wait for a slot in arrival order, and anything beyond is refused with RESOURCE_EXHAUSTED at
// once, so that an overloaded server answers quickly instead of queueing without bound.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>

#include "absl/status/statusor.h"
#include "common/metrics/gauge.h"

namespace specd::orchestrator {

class AdmissionQueue {
 public:
  // The gauges follow the running and waiting counts; they must outlive the queue.
  AdmissionQueue(int64_t max_running, int64_t max_waiting, metrics::Gauge& running,
                 metrics::Gauge& waiting);

  // A running slot, held until the ticket is destroyed.
  class Ticket {
   public:
    Ticket(Ticket&& other) noexcept : queue_(other.queue_) { other.queue_ = nullptr; }
    Ticket& operator=(Ticket&&) = delete;
    ~Ticket();

   private:
    friend class AdmissionQueue;
    explicit Ticket(AdmissionQueue* queue) : queue_(queue) {}
    AdmissionQueue* queue_;
  };

  // Waits for a slot. RESOURCE_EXHAUSTED when max_waiting requests are already waiting;
  // CANCELLED once `cancelled()` (checked while waiting) is true; UNAVAILABLE after Close.
  absl::StatusOr<Ticket> Admit(const std::function<bool()>& cancelled);

  // Refuses every waiting and later request (shutdown); running ones keep their slots.
  void Close();

 private:
  void Leave();

  const int64_t max_running_;
  const int64_t max_waiting_;
  metrics::Gauge& running_gauge_;
  metrics::Gauge& waiting_gauge_;
  std::mutex mutex_;
  std::condition_variable slot_freed_;
  int64_t running_ = 0;
  int64_t waiting_ = 0;
  uint64_t next_ticket_ = 0;     // arrival order of waiting requests
  uint64_t serving_ticket_ = 0;  // the first waiting request that may take a free slot
  std::set<uint64_t> skipped_;   // tickets that left the line before their turn
  bool closed_ = false;
};

}  // namespace specd::orchestrator
