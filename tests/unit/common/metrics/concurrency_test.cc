// Many threads update metrics, looking their series up as the orchestrator does on every step,
// while another scrapes; nothing is lost and every scrape completes.
#include <gtest/gtest.h>
#include <prometheus/client_metric.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "common/metrics/exposition.h"

namespace specd::metrics {
namespace {

constexpr int kThreads = 8;
constexpr int kUpdatesPerThread = 100000;

TEST(Concurrency, UpdatesFromManyThreadsSumExactlyWhileScraping) {
  prometheus::Registry registry;
  prometheus::Family<prometheus::Counter>& drafts =
      prometheus::BuildCounter().Name("specd_drafts_total").Help("Drafts.").Register(registry);
  prometheus::Gauge& in_flight =
      prometheus::BuildGauge().Name("specd_running").Help("In flight.").Register(registry).Add({});
  prometheus::Histogram& latency = prometheus::BuildHistogram()
                                       .Name("specd_itl_seconds")
                                       .Help("ITL.")
                                       .Register(registry)
                                       .Add({}, prometheus::Histogram::BucketBoundaries{0.5, 1.5});
  prometheus::Family<prometheus::Counter>& per_thread =
      prometheus::BuildCounter().Name("specd_updates_total").Help("Per thread.").Register(registry);

  std::atomic<bool> done = false;
  std::atomic<int> scrapes = 0;
  std::thread scraper([&] {
    while (!done) {
      EXPECT_FALSE(Exposition(registry).empty());
      ++scrapes;
    }
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      prometheus::Counter& mine = per_thread.Add({{"thread", std::to_string(t)}});
      for (int i = 0; i < kUpdatesPerThread; ++i) {
        // Looked up every time on purpose: lookups of one series race with creation of others.
        drafts.Add({{"model", "qwen"}}).Increment();
        in_flight.Increment();
        latency.Observe(i % 2 == 0 ? 0.25 : 1.0);
        in_flight.Decrement();
        mine.Increment(2);
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  done = true;
  scraper.join();

  constexpr double kTotal = kThreads * kUpdatesPerThread;
  EXPECT_EQ(drafts.Add({{"model", "qwen"}}).Value(), kTotal);
  EXPECT_EQ(in_flight.Value(), 0);
  const prometheus::ClientMetric::Histogram observed = latency.Collect().histogram;
  EXPECT_EQ(observed.sample_count, static_cast<uint64_t>(kTotal));
  EXPECT_EQ(observed.sample_sum, kTotal / 2 * 0.25 + kTotal / 2 * 1.0);
  ASSERT_EQ(observed.bucket.size(), 3u);
  EXPECT_EQ(observed.bucket[0].cumulative_count, static_cast<uint64_t>(kTotal / 2));
  EXPECT_EQ(observed.bucket[1].cumulative_count, static_cast<uint64_t>(kTotal));
  EXPECT_EQ(observed.bucket[2].cumulative_count, static_cast<uint64_t>(kTotal));
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(per_thread.Add({{"thread", std::to_string(t)}}).Value(), 2.0 * kUpdatesPerThread);
  }
  EXPECT_GT(scrapes.load(), 0);
}

}  // namespace
}  // namespace specd::metrics
