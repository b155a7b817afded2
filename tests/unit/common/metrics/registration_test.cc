// What Registry accepts when a family is registered, and how misuse is reported.
#include <gtest/gtest.h>

#include <limits>

#include "common/metrics/registry.h"

namespace specd::metrics {
namespace {

TEST(Registry, ReturnsTheExistingFamilyWhenRegisteredAgainIdentically) {
  Registry registry;
  Family<Counter>& first = registry.AddCounter("specd_drafts_total", "Drafts.", {"model"});
  Family<Counter>& second = registry.AddCounter("specd_drafts_total", "Drafts.", {"model"});
  Family<Histogram>& latency = registry.AddHistogram("specd_e2e_seconds", "E2E.", {1, 2});

  EXPECT_EQ(&first, &second);
  EXPECT_EQ(&latency, &registry.AddHistogram("specd_e2e_seconds", "E2E.", {1, 2}));
  EXPECT_EQ(&first.WithLabels({"qwen"}), &second.WithLabels({"qwen"}));
}

TEST(Registry, AcceptsColonsInMetricNames) {
  Registry registry;
  registry.AddGauge("vllm:num_requests_running", "Running requests.").Get().Set(3);

  EXPECT_NE(registry.Exposition().find("vllm:num_requests_running 3\n"), std::string::npos);
}

TEST(Family, GetIsTheChildWithoutLabelValues) {
  Registry registry;
  Family<Gauge>& gauge = registry.AddGauge("specd_up", "Up.");

  EXPECT_EQ(&gauge.Get(), &gauge.WithLabels({}));
}

TEST(Counter, AcceptsZeroIncrement) {
  Counter counter;
  counter.Increment(0);
  EXPECT_EQ(counter.value(), 0);
}

using RegistryDeathTest = ::testing::Test;

TEST(RegistryDeathTest, AbortsOnWrongNumberOfLabelValues) {
  Registry registry;
  Family<Counter>& tokens =
      registry.AddCounter("specd_tokens_total", "Tokens.", {"model", "phase"});

  EXPECT_DEATH(tokens.WithLabels({"qwen"}),
               "specd_tokens_total has 2 label\\(s\\) \\[model, phase\\] but was given 1 "
               "value\\(s\\) \\[qwen\\]");
  EXPECT_DEATH(tokens.Get(), "specd_tokens_total has 2 label\\(s\\)");
}

TEST(RegistryDeathTest, AbortsWhenANameIsRegisteredAgainDifferently) {
  Registry registry;
  registry.AddCounter("specd_drafts_total", "Drafts.", {"model"});
  registry.AddHistogram("specd_e2e_seconds", "E2E.", {1, 2});

  EXPECT_DEATH(registry.AddCounter("specd_drafts_total", "Drafts.", {"regime"}),
               "\"specd_drafts_total\" is already registered as a counter with labels \\[model\\]; "
               "cannot register it again as a counter with labels \\[regime\\]");
  EXPECT_DEATH(registry.AddGauge("specd_drafts_total", "Drafts.", {"model"}),
               "cannot register it again as a gauge");
  EXPECT_DEATH(registry.AddHistogram("specd_e2e_seconds", "E2E.", {1, 3}),
               "already registered as a histogram with labels \\[\\] and buckets \\[1, 2\\]");
}

TEST(RegistryDeathTest, AbortsOnInvalidNames) {
  Registry registry;

  EXPECT_DEATH(registry.AddGauge("9lives", "Bad."), "\"9lives\" is not a valid metric name");
  EXPECT_DEATH(registry.AddGauge("specd-dash", "Bad."), "not a valid metric name");
  EXPECT_DEATH(registry.AddGauge("specd_ok", "Bad.", {"bad-label"}),
               "\"bad-label\" is not a valid label name");
  EXPECT_DEATH(registry.AddGauge("specd_ok", "Bad.", {"__reserved"}), "not a valid label name");
  EXPECT_DEATH(registry.AddGauge("specd_ok", "Bad.", {"model", "model"}),
               "lists label \"model\" twice");
}

TEST(RegistryDeathTest, AbortsOnCounterNameWithoutTotalSuffix) {
  Registry registry;

  EXPECT_DEATH(registry.AddCounter("specd_requests", "Bad."),
               "counter \"specd_requests\" must end in _total");
}

TEST(RegistryDeathTest, AbortsOnHistogramMisuse) {
  Registry registry;

  EXPECT_DEATH(registry.AddHistogram("specd_h", "Bad.", {1}, {"le"}),
               "may not use the label name \"le\"");
  EXPECT_DEATH(registry.AddHistogram("specd_h", "Bad.", {1, 1}),
               "must increase strictly, got 1 then 1");
  EXPECT_DEATH(
      registry.AddHistogram("specd_h", "Bad.", {1, std::numeric_limits<double>::infinity()}),
      "bucket bound \\+Inf is not finite");
}

TEST(RegistryDeathTest, AbortsWhenSampleNamesOfTwoFamiliesCollide) {
  Registry registry;
  registry.AddHistogram("specd_latency_seconds", "Latency.", {1});

  EXPECT_DEATH(registry.AddGauge("specd_latency_seconds_count", "Clash."),
               "gauge \"specd_latency_seconds_count\" would write samples named "
               "\"specd_latency_seconds_count\", as histogram \"specd_latency_seconds\" already");
}

TEST(CounterDeathTest, AbortsOnNegativeOrNaNIncrement) {
  Counter counter;

  EXPECT_DEATH(counter.Increment(-1), "Counter::Increment\\(-1\\): a counter only goes up");
  EXPECT_DEATH(counter.Increment(std::numeric_limits<double>::quiet_NaN()),
               "Counter::Increment\\(NaN\\)");
}

}  // namespace
}  // namespace specd::metrics
