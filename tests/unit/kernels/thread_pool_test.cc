#include "kernels/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace specd::kernels::cpu {
namespace {

TEST(ThreadPoolTest, RunsEveryPartOnceAndReturnsWhenAllHaveFinished) {
  for (int threads : {1, 2, 5}) {
    ThreadPool pool(threads);
    ASSERT_EQ(pool.size(), threads);
    for (int run = 0; run < 100; ++run) {
      std::vector<std::atomic<int>> calls(threads);
      pool.Run([&](int part) { calls[part].fetch_add(1); });
      for (int part = 0; part < threads; ++part) {
        EXPECT_EQ(calls[part].load(), 1) << "part " << part << " of " << threads << ", run " << run;
      }
    }
  }
}

TEST(ThreadPoolTest, WorkersThatFellAsleepBetweenCallsWakeForTheNext) {
  ThreadPool pool(3);
  for (int run = 0; run < 5; ++run) {
    // Longer than the workers stay awake after a call, so each call finds them asleep.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::vector<std::atomic<int>> calls(3);
    pool.Run([&](int part) { calls[part].fetch_add(1); });
    for (int part = 0; part < 3; ++part) EXPECT_EQ(calls[part].load(), 1) << "run " << run;
  }
}

TEST(ThreadPoolTest, PartZeroRunsOnTheCallingThread) {
  ThreadPool pool(3);
  std::thread::id part_zero;
  pool.Run([&](int part) {
    if (part == 0) part_zero = std::this_thread::get_id();
  });
  EXPECT_EQ(part_zero, std::this_thread::get_id());
}

TEST(ThreadPoolTest, PartsRunConcurrently) {
  ThreadPool pool(2);
  std::atomic<int> arrived = 0;
  // Each part waits for the other: this only returns if both run at the same time.
  pool.Run([&](int) {
    arrived.fetch_add(1);
    while (arrived.load() < 2) std::this_thread::yield();
  });
  EXPECT_EQ(arrived.load(), 2);
}

TEST(ThreadPoolTest, CallsFromSeveralThreadsRunOneAfterAnother) {
  ThreadPool pool(2);
  std::atomic<int> inside = 0;
  std::atomic<int> overlaps = 0;
  auto caller = [&] {
    for (int run = 0; run < 200; ++run) {
      pool.Run([&](int part) {
        if (part != 0) return;
        if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
        std::this_thread::yield();  // widen the window an overlapping call would fall into
        inside.fetch_sub(1);
      });
    }
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  EXPECT_EQ(overlaps.load(), 0);
}

TEST(ThreadPoolTest, ParallelForCoversTheRangeOnceInAlignedRuns) {
  ThreadPool pool(3);
  for (const int64_t count : {0, 1, 7, 16, 100}) {
    for (const int64_t align : {1, 4}) {
      std::vector<std::atomic<int>> covered(count);
      std::atomic<int> misaligned = 0;
      pool.ParallelFor(count, align, [&](int64_t begin, int64_t end) {
        if (begin % align != 0 || (end != count && end % align != 0)) misaligned.fetch_add(1);
        for (int64_t i = begin; i < end; ++i) covered[i].fetch_add(1);
      });
      for (int64_t i = 0; i < count; ++i) EXPECT_EQ(covered[i].load(), 1) << i << " of " << count;
      EXPECT_EQ(misaligned.load(), 0) << count << " in runs of " << align;
    }
  }
}

}  // namespace
}  // namespace specd::kernels::cpu
