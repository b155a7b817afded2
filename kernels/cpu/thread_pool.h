#pragma once
// A fixed set of worker threads that CPU kernels split one call over. Kernels on a decode step
// take ~100 µs, so starting threads per call (tens of µs each) would eat the gain; these threads
// are started once. Between calls they stay awake for a while (yielding the core to any other
// thread ready to run) before they sleep: a step's kernels come a few µs apart, and waking a
// sleeping thread (a futex call, then the scheduler) takes longer than that, hundreds of times
// per step.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace specd::kernels::cpu {

class ThreadPool {
 public:
  // `threads` parts run at once: the caller plus threads - 1 workers (at least one part).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls part(p) for every p in [0, size()) concurrently, part 0 on the calling thread, and
  // returns when all have returned. Calls from several threads at once run one after another.
  void Run(const std::function<void(int part)>& part);

  // Splits [0, count) into one run per part, each a multiple of `align` long (only the last
  // one ragged), and calls range(begin, end) for every non-empty run concurrently.
  void ParallelFor(int64_t count, int64_t align,
                   const std::function<void(int64_t begin, int64_t end)>& range);

  // One pool per process, started on first use with a part per available CPU (AvailableCpus),
  // or as many as SetSharedSize asked for before that.
  static ThreadPool& Shared();
  // Returns false, changing nothing, once Shared() has started.
  static bool SetSharedSize(int threads);

 private:
  void WorkerLoop(int part);
  // Returns once `ready()` holds: polls it for a while, then sleeps on `woken` until it holds.
  template <typename Ready>
  void WaitUntil(std::condition_variable& woken, const Ready& ready);
  // Wakes the threads sleeping on `woken` (after the state they wait on has changed).
  void Wake(std::condition_variable& woken);

  std::mutex run_mutex_;  // one Run at a time
  std::mutex mutex_;      // only for sleeping and waking: the state below is atomic
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  std::atomic<const std::function<void(int)>*> part_ = nullptr;
  std::atomic<uint64_t> generation_ = 0;  // bumped per Run; a worker runs each generation once
  std::atomic<int> pending_ = 0;          // workers still running the current generation
  std::atomic<bool> stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace specd::kernels::cpu
