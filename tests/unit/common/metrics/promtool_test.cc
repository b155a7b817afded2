// Prometheus's own linter accepts specd's exposition: `promtool check metrics` reads it on stdin
// and prints nothing when every line parses and follows the naming conventions.
#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/labels.h>
#include <prometheus/registry.h>

#include <filesystem>
#include <string>

#include "common/metrics/exposition.h"
#include "common/metrics/vllm_buckets.h"
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

void FillWithEveryKindOfMetric(prometheus::Registry& registry) {
  prometheus::Family<prometheus::Counter>& drafts =
      prometheus::BuildCounter()
          .Name("specd_spec_decode_num_drafts_total")
          .Help("Draft blocks proposed to the verifier.")
          .Register(registry);
  drafts.Add({{"model", "qwen3.5-4b"}}).Increment(12);
  drafts.Add({{"model", "C:\\odd \"model\"\nname"}}).Increment(1);
  prometheus::BuildCounter()
      .Name("specd_spec_decode_num_accepted_tokens_total")
      .Help("Accepted draft tokens.")
      .Register(registry)
      .Add({})
      .Increment(40);
  prometheus::BuildCounter()  // no series
      .Name("specd_request_errors_total")
      .Help("Failed requests.")
      .Register(registry);
  prometheus::BuildGauge()
      .Name("specd_requests_running")
      .Help("Requests in flight.")
      .Register(registry)
      .Add({})
      .Set(3);
  prometheus::BuildGauge()
      .Name("specd_kv_cache_usage_ratio")
      .Help("KV cache use, 1 = full, per device.")
      .Register(registry)
      .Add({{"device", "cuda:0"}})
      .Set(0.125);

  const prometheus::Labels labels = {{"model", "qwen3.5-4b"}, {"regime", "short"}};
  prometheus::Histogram& ttft = prometheus::BuildHistogram()
                                    .Name("specd_time_to_first_token_seconds")
                                    .Help("Time to first token.")
                                    .Register(registry)
                                    .Add(labels, TimeToFirstTokenBuckets());
  prometheus::Histogram& itl = prometheus::BuildHistogram()
                                   .Name("specd_inter_token_latency_seconds")
                                   .Help("Inter-token latency.")
                                   .Register(registry)
                                   .Add(labels, InterTokenLatencyBuckets());
  prometheus::Histogram& e2e = prometheus::BuildHistogram()
                                   .Name("specd_e2e_request_latency_seconds")
                                   .Help("Request latency.")
                                   .Register(registry)
                                   .Add(labels, RequestLatencyBuckets());
  for (const double seconds : {0.0004, 0.03, 0.3, 2.0, 90.0, 10000.0}) {
    ttft.Observe(seconds);
    itl.Observe(seconds);
    e2e.Observe(seconds);
  }
}

TEST(Promtool, AcceptsARegistryHoldingEveryKindOfMetric) {
  prometheus::Registry registry;
  FillWithEveryKindOfMetric(registry);

  const testing::ProcessResult result = CheckMetrics(Exposition(registry));

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
