#pragma once
// The step schedulers whose forwards run on one device — the target's and the drafter's in one
// process — take turns: one forward at a time. Two forwards at once on a CPU's cores each take
// about twice as long, and let the sessions split into two halves that take turns (one drafting
// while the other verifies), each forward half as wide as it could be: measured on the 0.8B
// shape, mean target batches of 2.7 at 4 clients and 10.7 at 16 when the halves formed.
// A scheduler that would start a step while another's runs waits for it instead, and then for
// the members that step gives back (StepBatcher).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace specd::engine {

class DeviceTurns {
 public:
  using Clock = std::chrono::steady_clock;

  // Calls `wake` whenever a step ends, until Unsubscribe(id) returns. `wake` may take its
  // scheduler's lock; the scheduler must not call Subscribe or Unsubscribe under it (the other
  // calls take no lock).
  int64_t Subscribe(std::function<void()> wake);
  void Unsubscribe(int64_t id);

  // Takes the device for a step: false while another step has it.
  bool TryBegin();
  // Gives it back, and wakes every subscriber.
  void End();

  bool busy() const { return busy_.load(); }
  // When the last step ended (the clock's epoch before any).
  Clock::time_point last_end() const {
    return Clock::time_point(Clock::duration(last_end_.load()));
  }

 private:
  std::atomic<bool> busy_ = false;
  std::atomic<Clock::rep> last_end_ = 0;
  std::mutex mutex_;  // guards the subscribers
  int64_t next_id_ = 0;
  std::vector<std::pair<int64_t, std::function<void()>>> wakes_;
};

}  // namespace specd::engine
