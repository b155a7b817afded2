#include "services/orchestrator/admission_queue.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace specd::orchestrator {

AdmissionQueue::AdmissionQueue(int64_t max_running, int64_t max_waiting, metrics::Gauge& running,
                               metrics::Gauge& waiting)
    : max_running_(max_running),
      max_waiting_(max_waiting),
      running_gauge_(running),
      waiting_gauge_(waiting) {}

AdmissionQueue::Ticket::~Ticket() {
  if (queue_ != nullptr) queue_->Leave();
}

absl::StatusOr<AdmissionQueue::Ticket> AdmissionQueue::Admit(
    const std::function<bool()>& cancelled) {
  std::unique_lock lock(mutex_);
  if (closed_) return absl::UnavailableError("the server is shutting down");
  if (running_ >= max_running_ && waiting_ >= max_waiting_) {
    return absl::ResourceExhaustedError(absl::StrCat("the server is full: ", running_,
                                                     " requests running and ", waiting_,
                                                     " waiting; retry with backoff"));
  }
  const uint64_t ticket = next_ticket_++;
  ++waiting_;
  waiting_gauge_.Set(static_cast<double>(waiting_));
  absl::Status outcome = absl::OkStatus();
  // First come, first served: a request takes a slot only when every earlier one has.
  while (!(ticket == serving_ticket_ && running_ < max_running_)) {
    if (closed_) {
      outcome = absl::UnavailableError("the server is shutting down");
      break;
    }
    if (cancelled()) {
      outcome = absl::CancelledError("cancelled while waiting for a slot");
      break;
    }
    // Cancellation has no notification, so waiting polls it.
    slot_freed_.wait_for(lock, std::chrono::milliseconds(50));
  }
  --waiting_;
  waiting_gauge_.Set(static_cast<double>(waiting_));
  if (ticket == serving_ticket_) {
    ++serving_ticket_;
  } else {
    // A request that leaves the line early must not block those behind it: they renumber by
    // skipping its ticket, which the serving counter does once it gets there.
    skipped_.insert(ticket);
  }
  while (skipped_.erase(serving_ticket_) > 0) ++serving_ticket_;
  slot_freed_.notify_all();
  if (!outcome.ok()) return outcome;
  ++running_;
  running_gauge_.Set(static_cast<double>(running_));
  return Ticket(this);
}

void AdmissionQueue::Leave() {
  std::lock_guard lock(mutex_);
  --running_;
  running_gauge_.Set(static_cast<double>(running_));
  slot_freed_.notify_all();
}

void AdmissionQueue::Close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  slot_freed_.notify_all();
}

}  // namespace specd::orchestrator
