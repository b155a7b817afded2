// Prometheus's own linter accepts specd's exposition: `promtool check metrics` reads it on stdin
// and prints nothing when every line parses and follows the naming conventions.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "common/metrics/registry.h"
#include "tests/support/subprocess.h"

namespace specd::metrics {
namespace {

constexpr char kPromtool[] = "/usr/bin/promtool";

testing::ProcessResult CheckMetrics(const std::string& exposition) {
  // scripts/setup.sh installs Debian's prometheus package; missing it is a broken setup.
  EXPECT_TRUE(std::filesystem::exists(kPromtool))
      << kPromtool << " is missing: install the prometheus package (scripts/setup.sh)";
  return testing::RunProcess({kPromtool, "check", "metrics"}, exposition);
}

void FillWithEveryKindOfMetric(Registry& registry) {
  Family<Counter>& drafts = registry.AddCounter(
      "specd_spec_decode_num_drafts_total", "Draft blocks proposed to the verifier.", {"model"});
  drafts.WithLabels({"qwen3.5-4b"}).Increment(12);
  drafts.WithLabels({"C:\\odd \"model\"\nname"}).Increment(1);
  registry.AddCounter("specd_spec_decode_num_accepted_tokens_total", "Accepted draft tokens.")
      .Get()
      .Increment(40);
  registry.AddCounter("specd_request_errors_total", "Failed requests.", {"code"});  // no children
  registry.AddGauge("specd_requests_running", "Requests in flight.").Get().Set(3);
  registry
      .AddGauge("specd_kv_cache_usage_ratio", "KV cache use, 1 = full.\nPer device.", {"device"})
      .WithLabels({"cuda:0"})
      .Set(0.125);

  const std::vector<std::string> labels = {"model"};
  Histogram& ttft = registry
                        .AddHistogram("specd_time_to_first_token_seconds", "Time to first token.",
                                      TimeToFirstTokenBuckets(), labels)
                        .WithLabels({"qwen3.5-4b"});
  Histogram& itl = registry
                       .AddHistogram("specd_inter_token_latency_seconds", "Inter-token latency.",
                                     InterTokenLatencyBuckets(), labels)
                       .WithLabels({"qwen3.5-4b"});
  Histogram& e2e = registry
                       .AddHistogram("specd_e2e_request_latency_seconds", "Request latency.",
                                     RequestLatencyBuckets(), labels)
                       .WithLabels({"qwen3.5-4b"});
  for (const double seconds : {0.0004, 0.03, 0.3, 2.0, 90.0, 10000.0}) {
    ttft.Observe(seconds);
    itl.Observe(seconds);
    e2e.Observe(seconds);
  }
}

TEST(Promtool, AcceptsARegistryHoldingEveryKindOfMetric) {
  Registry registry;
  FillWithEveryKindOfMetric(registry);

  const testing::ProcessResult result = CheckMetrics(registry.Exposition());

  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(result.err, "");
}

// Shows the check above can fail: promtool does flag a badly named counter.
TEST(Promtool, RejectsACounterWithoutTotalSuffix) {
  const testing::ProcessResult result = CheckMetrics(
      "# HELP specd_requests Requests.\n# TYPE specd_requests counter\n"
      "specd_requests 1\n");

  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE((result.out + result.err).find("_total"), std::string::npos)
      << result.out << result.err;
}

}  // namespace
}  // namespace specd::metrics
