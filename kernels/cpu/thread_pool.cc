#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "kernels/cpu/available_cpus.h"

namespace specd::kernels::cpu {

ThreadPool::ThreadPool(int threads) {
  for (int part = 1; part < std::max(threads, 1); ++part) {
    workers_.emplace_back([this, part] { WorkerLoop(part); });
  }
}

ThreadPool::~ThreadPool() {
  stopping_ = true;
  Wake(work_ready_);
  for (std::thread& worker : workers_) worker.join();
}

namespace {

// How long a thread waiting for the pool stays awake before it sleeps: longer than the gaps between
// a step's kernels, short enough that an idle server leaves the cores alone.
constexpr std::chrono::microseconds kStayAwakeFor{200};

}  // namespace

template <typename Ready>
void ThreadPool::WaitUntil(std::condition_variable& woken, const Ready& ready) {
  const auto awake_until = std::chrono::steady_clock::now() + kStayAwakeFor;
  while (std::chrono::steady_clock::now() < awake_until) {
    if (ready()) return;
    // Yielding, not pausing: the core stays awake (a sleeping one is slow to wake, most of all a
    // virtual machine's), yet any other thread ready to run there, such as the engine thread the
    // last step handed work to, runs at once.
    std::this_thread::yield();
  }
  std::unique_lock lock(mutex_);
  woken.wait(lock, ready);
}

void ThreadPool::Wake(std::condition_variable& woken) {
  // A sleeper checks its condition under the mutex before it sleeps, so taking the mutex here
  // orders this wake-up after that check: none is lost. With nobody asleep this makes no
  // system call.
  { std::lock_guard lock(mutex_); }
  woken.notify_all();
}

void ThreadPool::Run(const std::function<void(int)>& part) {
  if (workers_.empty()) {
    part(0);
    return;
  }
  std::lock_guard run_lock(run_mutex_);
  part_ = &part;
  pending_ = static_cast<int>(workers_.size());
  ++generation_;
  Wake(work_ready_);
  part(0);
  WaitUntil(work_done_, [this] { return pending_ == 0; });
  part_ = nullptr;
}

void ThreadPool::ParallelFor(int64_t count, int64_t align,
                             const std::function<void(int64_t, int64_t)>& range) {
  const int64_t parts = size();
  const int64_t per_part = (count + parts * align - 1) / (parts * align) * align;
  if (per_part >= count) {  // one run: no workers to wake
    if (count > 0) range(0, count);
    return;
  }
  Run([&](int part) {
    const int64_t begin = std::min(count, part * per_part);
    const int64_t end = std::min(count, begin + per_part);
    if (begin < end) range(begin, end);
  });
}

namespace {

std::atomic<int> shared_size{0};  // 0: one part per available CPU; -1: started

}  // namespace

ThreadPool& ThreadPool::Shared() {
  static ThreadPool pool([] {
    const int asked = shared_size.exchange(-1);
    return asked > 0 ? asked : AvailableCpus();
  }());
  return pool;
}

bool ThreadPool::SetSharedSize(int threads) {
  int current = shared_size.load();
  while (current >= 0) {
    if (shared_size.compare_exchange_weak(current, std::max(threads, 1))) return true;
  }
  return false;
}

void ThreadPool::WorkerLoop(int part) {
  uint64_t done_generation = 0;
  while (true) {
    WaitUntil(work_ready_, [&] { return stopping_ || generation_ != done_generation; });
    if (stopping_) return;
    done_generation = generation_;
    (*part_.load())(part);
    if (pending_.fetch_sub(1) == 1) Wake(work_done_);
  }
}

}  // namespace specd::kernels::cpu
