// The exact text Registry::Exposition() writes for each kind of metric.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/metrics/registry.h"

namespace specd::metrics {
namespace {

TEST(Exposition, WritesCounterWithoutLabels) {
  Registry registry;
  Counter& requests = registry.AddCounter("specd_requests_total", "Requests served.").Get();
  requests.Increment();
  requests.Increment(2);

  EXPECT_EQ(registry.Exposition(), R"(# HELP specd_requests_total Requests served.
# TYPE specd_requests_total counter
specd_requests_total 3
)");
}

TEST(Exposition, WritesLabeledChildrenSortedByLabelValues) {
  Registry registry;
  Family<Counter>& tokens =
      registry.AddCounter("specd_tokens_total", "Tokens processed.", {"model", "phase"});
  tokens.WithLabels({"qwen", "prefill"}).Increment(100);
  tokens.WithLabels({"draft", "decode"}).Increment(7);
  tokens.WithLabels({"qwen", "decode"}).Increment(0.5);

  EXPECT_EQ(registry.Exposition(), R"(# HELP specd_tokens_total Tokens processed.
# TYPE specd_tokens_total counter
specd_tokens_total{model="draft",phase="decode"} 7
specd_tokens_total{model="qwen",phase="decode"} 0.5
specd_tokens_total{model="qwen",phase="prefill"} 100
)");
}

TEST(Exposition, WritesGaugesWithAndWithoutLabels) {
  Registry registry;
  Gauge& running = registry.AddGauge("specd_requests_running", "Requests in flight.").Get();
  running.Set(2.5);
  running.Add(-1);
  Family<Gauge>& usage = registry.AddGauge("specd_kv_cache_usage_ratio", "KV use.", {"device"});
  usage.WithLabels({"cuda:1"}).Set(-0.25);
  usage.WithLabels({"cuda:0"}).Set(1e-6);

  EXPECT_EQ(registry.Exposition(), R"(# HELP specd_requests_running Requests in flight.
# TYPE specd_requests_running gauge
specd_requests_running 1.5
# HELP specd_kv_cache_usage_ratio KV use.
# TYPE specd_kv_cache_usage_ratio gauge
specd_kv_cache_usage_ratio{device="cuda:0"} 1e-06
specd_kv_cache_usage_ratio{device="cuda:1"} -0.25
)");
}

TEST(Exposition, WritesHistogramWithCumulativeBucketsSumAndCount) {
  Registry registry;
  Histogram& latency =
      registry.AddHistogram("specd_step_seconds", "Step time.", {0.25, 1, 4}).Get();
  for (const double seconds : {0.125, 0.25, 0.5, 8.0}) latency.Observe(seconds);

  // 0.25 falls in le="0.25": a bucket counts values less than or equal to its bound.
  EXPECT_EQ(registry.Exposition(), R"(# HELP specd_step_seconds Step time.
# TYPE specd_step_seconds histogram
specd_step_seconds_bucket{le="0.25"} 2
specd_step_seconds_bucket{le="1"} 3
specd_step_seconds_bucket{le="4"} 3
specd_step_seconds_bucket{le="+Inf"} 4
specd_step_seconds_sum 8.875
specd_step_seconds_count 4
)");
  EXPECT_EQ(latency.count(), 4u);
  EXPECT_EQ(latency.sum(), 8.875);
}

TEST(Exposition, PutsLeAfterTheFamilyLabelsOfAHistogram) {
  Registry registry;
  Family<Histogram>& ttft =
      registry.AddHistogram("specd_ttft_seconds", "TTFT.", {0.5}, {"model", "regime"});
  ttft.WithLabels({"qwen", "short"}).Observe(0.75);
  ttft.WithLabels({"qwen", "long"}).Observe(0.5);

  EXPECT_EQ(registry.Exposition(), R"(# HELP specd_ttft_seconds TTFT.
# TYPE specd_ttft_seconds histogram
specd_ttft_seconds_bucket{model="qwen",regime="long",le="0.5"} 1
specd_ttft_seconds_bucket{model="qwen",regime="long",le="+Inf"} 1
specd_ttft_seconds_sum{model="qwen",regime="long"} 0.5
specd_ttft_seconds_count{model="qwen",regime="long"} 1
specd_ttft_seconds_bucket{model="qwen",regime="short",le="0.5"} 0
specd_ttft_seconds_bucket{model="qwen",regime="short",le="+Inf"} 1
specd_ttft_seconds_sum{model="qwen",regime="short"} 0.75
specd_ttft_seconds_count{model="qwen",regime="short"} 1
)");
}

TEST(Exposition, CountsNaNObservationsInTheInfBucket) {
  Registry registry;
  Histogram& histogram = registry.AddHistogram("specd_odd", "Odd values.", {1}).Get();
  histogram.Observe(std::nan(""));

  EXPECT_EQ(histogram.CumulativeCounts(), (std::vector<uint64_t>{0, 1}));
}

TEST(Exposition, WritesOnlyHelpAndTypeForAFamilyWithoutChildren) {
  Registry registry;
  registry.AddCounter("specd_errors_total", "Errors.", {"code"});
  registry.AddHistogram("specd_wait_seconds", "Waits.", {1, 2});

  EXPECT_EQ(registry.Exposition(), R"(# HELP specd_errors_total Errors.
# TYPE specd_errors_total counter
# HELP specd_wait_seconds Waits.
# TYPE specd_wait_seconds histogram
)");
}

TEST(Exposition, EscapesLabelValuesAndHelpText) {
  Registry registry;
  registry.AddGauge("specd_info", "Build info.\nPath C:\\specd", {"path"})
      .WithLabels({"C:\\models\n\"qwen\""})
      .Set(1);

  EXPECT_EQ(registry.Exposition(), R"(# HELP specd_info Build info.\nPath C:\\specd
# TYPE specd_info gauge
specd_info{path="C:\\models\n\"qwen\""} 1
)");
}

TEST(Exposition, ListsFamiliesInRegistrationOrder) {
  Registry registry;
  registry.AddGauge("zeta", "Last by name, first registered.").Get().Set(1);
  registry.AddGauge("alpha", "First by name, second registered.").Get().Set(2);

  EXPECT_EQ(registry.Exposition(), R"(# HELP zeta Last by name, first registered.
# TYPE zeta gauge
zeta 1
# HELP alpha First by name, second registered.
# TYPE alpha gauge
alpha 2
)");
}

}  // namespace
}  // namespace specd::metrics
