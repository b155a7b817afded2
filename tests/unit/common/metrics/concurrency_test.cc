// Many threads update metrics while another scrapes; nothing is lost and scrapes stay coherent.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "common/metrics/registry.h"

namespace specd::metrics {
namespace {

constexpr int kThreads = 8;
constexpr int kUpdatesPerThread = 100000;

TEST(Concurrency, IncrementsFromManyThreadsSumExactlyWhileScraping) {
  Registry registry;
  Family<Counter>& drafts =
      registry.AddCounter("specd_spec_decode_num_drafts_total", "Drafts.", {"model"});
  Gauge& in_flight = registry.AddGauge("specd_requests_running", "In flight.").Get();
  Histogram& latency = registry.AddHistogram("specd_itl_seconds", "ITL.", {0.5, 1.5}).Get();
  Family<Counter>& per_thread =
      registry.AddCounter("specd_thread_updates_total", "Per thread.", {"thread"});

  std::atomic<bool> done = false;
  std::atomic<int> scrapes = 0;
  std::thread scraper([&] {
    while (!done) {
      EXPECT_FALSE(registry.Exposition().empty());
      ++scrapes;
    }
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      Counter& mine = per_thread.WithLabels({std::to_string(t)});
      for (int i = 0; i < kUpdatesPerThread; ++i) {
        // Looked up every time on purpose: lookups of one child race with creation of others.
        drafts.WithLabels({"qwen"}).Increment();
        in_flight.Add(1);
        latency.Observe(i % 2 == 0 ? 0.25 : 1.0);
        in_flight.Add(-1);
        mine.Increment(2);
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  done = true;
  scraper.join();

  constexpr double kTotal = kThreads * kUpdatesPerThread;
  EXPECT_EQ(drafts.WithLabels({"qwen"}).value(), kTotal);
  EXPECT_EQ(in_flight.value(), 0);
  EXPECT_EQ(latency.sum(), kTotal / 2 * 0.25 + kTotal / 2 * 1.0);
  constexpr uint64_t kCount = kThreads * kUpdatesPerThread;
  EXPECT_EQ(latency.CumulativeCounts(), (std::vector<uint64_t>{kCount / 2, kCount, kCount}));
  EXPECT_EQ(latency.count(), kCount);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(per_thread.WithLabels({std::to_string(t)}).value(), 2.0 * kUpdatesPerThread);
  }
  EXPECT_GT(scrapes.load(), 0);
}

}  // namespace
}  // namespace specd::metrics
