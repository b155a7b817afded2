#pragma once
// The dynamic batcher both models' schedulers share (Triton's dynamic batcher is the model):
// callers queue jobs and wait; one worker thread forms each step from the jobs waiting and runs
// them in one call (one forward over many sequences). A step starts once every member — a
// session that will queue again, such as one drafting while the others verify — has queued a
// job, or once the wait for them runs out: `max_delay`, or a quarter of the last step's time if
// that is longer, from when the first job came or the last step ended (a member that misses a
// step waits for the whole next one, so a long step, one that took a prefill chunk, is worth a
// longer wait). It takes urgent jobs (decode and verify steps) before the rest (prefill
// chunks), first come first served, up to `max_rows` rows and `max_sequences` jobs, and at least
// one job. Jobs a step did not finish (a prefill with chunks left) stay queued for the next one,
// so new requests join at the next step and finished ones leave. Batchers of one device given the
// same DeviceTurns run one step at a time: a step due while another's runs waits for it to end,
// then `max_delay` more for the members it gives back.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "common/engine/device_turns.h"

namespace specd::engine {

struct BatchingOptions {
  int64_t max_rows = 2048;     // tokens per forward: a step's budget
  int64_t max_sequences = 64;  // jobs per forward; 1 runs one sequence at a time (no batching)
  // How long a step waits for members still to come, at least (see above).
  std::chrono::microseconds max_delay{2000};
  // Sees each step's jobs and rows once it ran (metrics); may be empty.
  std::function<void(int64_t sequences, int64_t rows)> on_step = {};
  // Shared with the other batchers whose forwards run on the same device; none: runs alone.
  std::shared_ptr<DeviceTurns> turns = nullptr;
};

// What the steps so far did, for metrics and benchmarks.
struct BatchingStats {
  int64_t steps = 0;
  int64_t sequences = 0;  // jobs summed over steps: sequences / steps is the mean batch size
  int64_t rows = 0;

  double mean_batch_size() const { return steps == 0 ? 0 : static_cast<double>(sequences) / steps; }
};

// `Job` has `int64_t rows() const` (its rows in the next step) and `bool urgent() const`.
template <typename Job>
class StepBatcher {
 public:
  using Clock = std::chrono::steady_clock;

  // Runs one step over `batch`; returns, for each job, whether the step finished it.
  using Step = std::function<std::vector<bool>(std::span<Job* const> batch)>;

  StepBatcher(BatchingOptions options, Step step)
      : options_(options), step_(std::move(step)), worker_([this] { Work(); }) {
    if (options_.turns != nullptr) {
      turn_wake_ = options_.turns->Subscribe([this] {
        std::lock_guard lock(mutex_);
        queued_.notify_all();
      });
    }
  }

  ~StepBatcher() {
    if (options_.turns != nullptr) options_.turns->Unsubscribe(turn_wake_);
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    queued_.notify_all();
    worker_.join();
  }

  StepBatcher(const StepBatcher&) = delete;
  StepBatcher& operator=(const StepBatcher&) = delete;

  // Queues `job` and returns once a step has finished it: how long the job waited for that
  // step to start (others' steps running, members still to come), since it arrived or the step
  // before that ran it ended.
  Clock::duration Run(Job& job) {
    Entry entry{.job = &job, .arrived = Clock::now()};
    std::unique_lock lock(mutex_);
    queue_.push_back(&entry);
    queued_.notify_all();
    finished_.wait(lock, [&] { return entry.finished; });
    return entry.queued;
  }

  // A session that queues jobs again and again; steps wait for it (as above) while the
  // membership lives.
  class Membership {
   public:
    Membership() = default;
    explicit Membership(StepBatcher* batcher) : batcher_(batcher) { batcher_->Count(+1); }
    Membership(Membership&& other) noexcept : batcher_(std::exchange(other.batcher_, nullptr)) {}
    Membership& operator=(Membership&& other) noexcept {
      if (this != &other) {
        Leave();
        batcher_ = std::exchange(other.batcher_, nullptr);
      }
      return *this;
    }
    bool joined() const { return batcher_ != nullptr; }
    ~Membership() { Leave(); }

   private:
    void Leave() {
      if (batcher_ != nullptr) std::exchange(batcher_, nullptr)->Count(-1);
    }
    StepBatcher* batcher_ = nullptr;
  };

  Membership Join() { return Membership(this); }

  BatchingStats stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
  }

 private:
  // The share of the last step's time a step waits for its members (when above max_delay).
  static constexpr double kWaitShareOfLastStep = 0.25;

  struct Entry {
    Job* job = nullptr;
    Clock::time_point arrived;
    Clock::duration queued{};  // from `arrived` to the start of the last step that ran it
    bool finished = false;
  };

  void Count(int delta) {
    {
      std::lock_guard lock(mutex_);
      members_ += delta;
    }
    queued_.notify_all();  // a member leaving may complete the step being waited for
  }

  bool AllMembersQueued() const { return static_cast<int64_t>(queue_.size()) >= members_; }

  // With turns, takes the device: while another step has it, waits for that step to end and
  // then, unless every member is queued already, `max_delay` for the members it gives back.
  void AwaitTurn(std::unique_lock<std::mutex>& lock) {
    DeviceTurns* turns = options_.turns.get();
    if (turns == nullptr) return;
    while (!turns->TryBegin()) {
      queued_.wait(lock, [&] { return !turns->busy(); });
      queued_.wait_until(lock, turns->last_end() + options_.max_delay,
                         [&] { return stopping_ || AllMembersQueued(); });
    }
  }

  // The jobs of the next step, in the order they go into the forward.
  std::vector<Entry*> Select() const {
    std::vector<Entry*> order;
    for (const bool urgent : {true, false}) {
      for (Entry* entry : queue_) {
        if (entry->job->urgent() == urgent) order.push_back(entry);
      }
    }
    std::vector<Entry*> batch;
    int64_t rows = 0;
    for (Entry* entry : order) {
      if (static_cast<int64_t>(batch.size()) == options_.max_sequences) break;
      const int64_t job_rows = entry->job->rows();
      if (!batch.empty() && rows + job_rows > options_.max_rows) continue;
      batch.push_back(entry);
      rows += job_rows;
    }
    return batch;
  }

  void Work() {
    std::unique_lock lock(mutex_);
    // The delay counts from when a step could start: jobs that queued while the last step ran
    // still wait for the members it returned to, or two halves of the members would take turns
    // (each half's jobs past their delay whenever the other half's step ends) and never merge.
    Clock::time_point last_step_end;
    Clock::duration last_step_time{};
    while (true) {
      queued_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping with nothing left to run
      Clock::time_point first = queue_.front()->arrived;
      for (const Entry* entry : queue_) first = std::min(first, entry->arrived);
      const Clock::duration wait = std::max<Clock::duration>(
          options_.max_delay,
          std::chrono::duration_cast<Clock::duration>(last_step_time * kWaitShareOfLastStep));
      queued_.wait_until(lock, std::max(first, last_step_end) + wait,
                         [&] { return stopping_ || AllMembersQueued(); });
      AwaitTurn(lock);
      const std::vector<Entry*> batch = Select();
      std::vector<Job*> jobs;
      int64_t rows = 0;
      for (Entry* entry : batch) {
        jobs.push_back(entry->job);
        rows += entry->job->rows();
      }
      const Clock::time_point began = Clock::now();
      for (Entry* entry : batch) entry->queued = began - entry->arrived;
      lock.unlock();
      const std::vector<bool> done = step_(jobs);
      if (options_.turns != nullptr) options_.turns->End();
      lock.lock();
      const Clock::time_point now = Clock::now();
      last_step_end = now;
      last_step_time = now - began;
      for (size_t i = 0; i < batch.size(); ++i) {
        if (done[i]) {
          batch[i]->finished = true;
          queue_.erase(std::find(queue_.begin(), queue_.end(), batch[i]));
        } else {
          batch[i]->arrived = now;  // waits for the members again, like a new job
        }
      }
      ++stats_.steps;
      stats_.sequences += static_cast<int64_t>(batch.size());
      stats_.rows += rows;
      finished_.notify_all();
      if (options_.on_step) options_.on_step(static_cast<int64_t>(batch.size()), rows);
    }
  }

  const BatchingOptions options_;
  const Step step_;
  mutable std::mutex mutex_;
  std::condition_variable queued_;
  std::condition_variable finished_;
  std::vector<Entry*> queue_;  // arrival order
  int64_t members_ = 0;
  bool stopping_ = false;
  BatchingStats stats_;
  int64_t turn_wake_ = 0;  // the subscription to options_.turns
  std::thread worker_;     // last: starts once everything it reads is built
};

}  // namespace specd::engine
