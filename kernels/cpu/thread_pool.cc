#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>

#include "kernels/cpu/available_cpus.h"

namespace specd::kernels::cpu {

ThreadPool::ThreadPool(int threads) {
  for (int part = 1; part < std::max(threads, 1); ++part) {
    workers_.emplace_back([this, part] { WorkerLoop(part); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::Run(const std::function<void(int)>& part) {
  if (workers_.empty()) {
    part(0);
    return;
  }
  std::lock_guard run_lock(run_mutex_);
  {
    std::lock_guard lock(mutex_);
    part_ = &part;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  work_ready_.notify_all();
  part(0);
  std::unique_lock lock(mutex_);
  work_done_.wait(lock, [this] { return pending_ == 0; });
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
    const std::function<void(int)>* work;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || generation_ != done_generation; });
      if (stopping_) return;
      done_generation = generation_;
      work = part_;
    }
    (*work)(part);
    {
      std::lock_guard lock(mutex_);
      if (--pending_ > 0) continue;
    }
    work_done_.notify_one();
  }
}

}  // namespace specd::kernels::cpu
