// What specd relies on from prometheus::Registry: registering a family again (a second
// OrchestratorMetrics or gRPC server on one registry) shares the family and its series.
#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace specd::metrics {
namespace {

TEST(Registry, ReturnsTheExistingFamilyWhenANameIsRegisteredAgain) {
  prometheus::Registry registry;
  prometheus::Family<prometheus::Counter>& first =
      prometheus::BuildCounter().Name("specd_drafts_total").Help("Drafts.").Register(registry);
  prometheus::Family<prometheus::Counter>& second =
      prometheus::BuildCounter().Name("specd_drafts_total").Help("Drafts.").Register(registry);
  prometheus::Family<prometheus::Histogram>& latency =
      prometheus::BuildHistogram().Name("specd_e2e_seconds").Help("E2E.").Register(registry);

  EXPECT_EQ(&first, &second);
  EXPECT_EQ(
      &latency,
      &prometheus::BuildHistogram().Name("specd_e2e_seconds").Help("E2E.").Register(registry));
  EXPECT_EQ(&first.Add({{"model", "qwen"}}), &second.Add({{"model", "qwen"}}));
}

}  // namespace
}  // namespace specd::metrics
