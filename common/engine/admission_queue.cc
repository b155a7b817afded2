#include "common/engine/admission_queue.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"

namespace specd::engine {

AdmissionQueue::AdmissionQueue(int64_t capacity, int64_t max_waiting, std::string unit,
                               std::function<void(const AdmissionCounts&)> on_change)
    : capacity_(capacity),
      max_waiting_(max_waiting),
      unit_(std::move(unit)),
      on_change_(std::move(on_change)) {
  std::lock_guard lock(mutex_);
  Changed();
}

AdmissionQueue::Ticket::~Ticket() {
  if (queue_ != nullptr) queue_->Leave(units_);
}

absl::StatusOr<AdmissionQueue::Ticket> AdmissionQueue::Admit(
    int64_t units, const std::function<bool()>& cancelled) {
  std::unique_lock lock(mutex_);
  if (closed_) return absl::UnavailableError("the server is shutting down");
  if (units > capacity_) {
    return absl::ResourceExhaustedError(absl::StrCat("this needs ", units, " ", unit_,
                                                     " and the server has ", capacity_, " in all"));
  }
  const bool fits_now = counts_.waiting == 0 && counts_.used + units <= capacity_;
  if (!fits_now && counts_.waiting >= max_waiting_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the server is full: ", counts_.used, " of ", capacity_, " ", unit_,
                     " in use and ", counts_.waiting, " requests waiting; retry with backoff"));
  }
  const uint64_t ticket = next_ticket_++;
  ++counts_.waiting;
  Changed();
  absl::Status outcome = absl::OkStatus();
  // First come, first served: a request takes units only when every earlier one has.
  while (!(ticket == serving_ticket_ && counts_.used + units <= capacity_)) {
    if (closed_) {
      outcome = absl::UnavailableError("the server is shutting down");
      break;
    }
    if (cancelled()) {
      outcome = absl::CancelledError(absl::StrCat("cancelled while waiting for ", unit_));
      break;
    }
    // Cancellation has no notification, so waiting polls it.
    units_freed_.wait_for(lock, std::chrono::milliseconds(50));
  }
  --counts_.waiting;
  if (ticket == serving_ticket_) {
    ++serving_ticket_;
  } else {
    // A request that leaves the line early must not block those behind it: they renumber by
    // skipping its ticket, which the serving counter does once it gets there.
    skipped_.insert(ticket);
  }
  while (skipped_.erase(serving_ticket_) > 0) ++serving_ticket_;
  units_freed_.notify_all();
  if (outcome.ok()) {
    counts_.used += units;
    ++counts_.holders;
  }
  Changed();
  if (!outcome.ok()) return outcome;
  return Ticket(this, units);
}

absl::StatusOr<AdmissionQueue::Ticket> AdmissionQueue::TryAdmit(int64_t units) {
  std::lock_guard lock(mutex_);
  if (closed_) return absl::UnavailableError("the server is shutting down");
  if (counts_.waiting > 0 || counts_.used + units > capacity_) {
    return absl::ResourceExhaustedError(absl::StrCat("this needs ", units, " ", unit_, " and ",
                                                     capacity_ - counts_.used, " of ", capacity_,
                                                     " are free now"));
  }
  counts_.used += units;
  ++counts_.holders;
  Changed();
  return Ticket(this, units);
}

void AdmissionQueue::Leave(int64_t units) {
  std::lock_guard lock(mutex_);
  counts_.used -= units;
  --counts_.holders;
  Changed();
  units_freed_.notify_all();
}

void AdmissionQueue::Close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  units_freed_.notify_all();
}

AdmissionCounts AdmissionQueue::counts() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

void AdmissionQueue::Changed() {
  if (on_change_) on_change_(counts_);
}

}  // namespace specd::engine
