// The text Exposition() writes for each kind of metric, as /metrics serves it: prometheus-cpp's
// TextSerializer over a registry's Collect().
#include "common/metrics/exposition.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <string>
#include <utility>
#include <vector>

namespace specd::metrics {
namespace {

TEST(Exposition, WritesACounter) {
  prometheus::Registry registry;
  prometheus::Counter& requests = prometheus::BuildCounter()
                                      .Name("specd_requests_total")
                                      .Help("Requests served.")
                                      .Register(registry)
                                      .Add({});
  requests.Increment();
  requests.Increment(2);

  EXPECT_EQ(Exposition(registry), R"(# HELP specd_requests_total Requests served.
# TYPE specd_requests_total counter
specd_requests_total 3
)");
}

// Label order is the series' own business in Prometheus; tests that match exposition lines need
// to know it: sorted by label name, whatever order the series was added in.
TEST(Exposition, WritesLabelsSortedByName) {
  prometheus::Registry registry;
  prometheus::BuildCounter()
      .Name("specd_request_success_total")
      .Help("Requests.")
      .Register(registry)
      .Add({{"model", "qwen"}, {"regime", "short"}, {"finished_reason", "stop"}})
      .Increment(7);

  EXPECT_EQ(Exposition(registry), R"(# HELP specd_request_success_total Requests.
# TYPE specd_request_success_total counter
specd_request_success_total{finished_reason="stop",model="qwen",regime="short"} 7
)");
}

TEST(Exposition, WritesGaugeValuesAsPrometheusReadsThem) {
  prometheus::Registry registry;
  prometheus::Family<prometheus::Gauge>& values =
      prometheus::BuildGauge().Name("specd_value").Help("Values.").Register(registry);
  const std::vector<std::pair<double, std::string>> cases = {
      {1.5, "1.5"},    {-0.25, "-0.25"}, {1e-6, "1e-06"}, {8589934592, "8589934592"},
      {1e20, "1e+20"}, {0, "0"}};
  for (const auto& [value, text] : cases) {
    values.Add({{"text", text}}).Set(value);
  }

  const std::string exposition = Exposition(registry);
  for (const auto& [value, text] : cases) {
    EXPECT_NE(exposition.find("specd_value{text=\"" + text + "\"} " + text + "\n"),
              std::string::npos)
        << value << " in\n"
        << exposition;
  }
}

TEST(Exposition, WritesHistogramWithCountSumAndCumulativeBuckets) {
  prometheus::Registry registry;
  prometheus::Histogram& latency =
      prometheus::BuildHistogram()
          .Name("specd_step_seconds")
          .Help("Step time.")
          .Register(registry)
          .Add({}, prometheus::Histogram::BucketBoundaries{0.25, 1, 4});
  for (const double seconds : {0.125, 0.25, 0.5, 8.0}) latency.Observe(seconds);

  // 0.25 falls in le="0.25": a bucket counts values less than or equal to its bound, as in vLLM.
  EXPECT_EQ(Exposition(registry), R"(# HELP specd_step_seconds Step time.
# TYPE specd_step_seconds histogram
specd_step_seconds_count 4
specd_step_seconds_sum 8.875
specd_step_seconds_bucket{le="0.25"} 2
specd_step_seconds_bucket{le="1"} 3
specd_step_seconds_bucket{le="4"} 3
specd_step_seconds_bucket{le="+Inf"} 4
)");
}

TEST(Exposition, PutsLeAfterTheSeriesLabelsOfAHistogram) {
  prometheus::Registry registry;
  prometheus::BuildHistogram()
      .Name("specd_ttft_seconds")
      .Help("TTFT.")
      .Register(registry)
      .Add({{"model", "qwen"}, {"regime", "short"}}, prometheus::Histogram::BucketBoundaries{0.5})
      .Observe(0.75);

  EXPECT_EQ(Exposition(registry), R"(# HELP specd_ttft_seconds TTFT.
# TYPE specd_ttft_seconds histogram
specd_ttft_seconds_count{model="qwen",regime="short"} 1
specd_ttft_seconds_sum{model="qwen",regime="short"} 0.75
specd_ttft_seconds_bucket{model="qwen",regime="short",le="0.5"} 0
specd_ttft_seconds_bucket{model="qwen",regime="short",le="+Inf"} 1
)");
}

// A family shows up with its first series: metrics that must read 0 before their first event
// (the trainer's finished jobs per state) add their series at start-up.
TEST(Exposition, OmitsAFamilyWithoutSeries) {
  prometheus::Registry registry;
  prometheus::BuildCounter().Name("specd_errors_total").Help("Errors.").Register(registry);
  prometheus::BuildGauge().Name("specd_up").Help("Up.").Register(registry).Add({});

  EXPECT_EQ(Exposition(registry), R"(# HELP specd_up Up.
# TYPE specd_up gauge
specd_up 0
)");
}

TEST(Exposition, EscapesLabelValues) {
  prometheus::Registry registry;
  prometheus::BuildGauge()
      .Name("specd_info")
      .Help("Build info.")
      .Register(registry)
      .Add({{"path", "C:\\models\n\"qwen\""}})
      .Set(1);

  EXPECT_EQ(Exposition(registry), R"(# HELP specd_info Build info.
# TYPE specd_info gauge
specd_info{path="C:\\models\n\"qwen\""} 1
)");
}

}  // namespace
}  // namespace specd::metrics
