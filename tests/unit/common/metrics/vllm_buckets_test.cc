// The vLLM bucket sets keep vLLM's shape: how many boundaries, where they start and end.
#include "common/metrics/vllm_buckets.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace specd::metrics {
namespace {

TEST(VllmBuckets, TimeToFirstTokenSpansOneMillisecondToFortyThreeMinutes) {
  const std::vector<double> buckets = TimeToFirstTokenBuckets();
  ASSERT_EQ(buckets.size(), 22u);
  EXPECT_EQ(buckets.front(), 0.001);
  EXPECT_EQ(buckets.back(), 2560);
  EXPECT_TRUE(std::is_sorted(buckets.begin(), buckets.end()));
}

TEST(VllmBuckets, InterTokenLatencySpansTenMillisecondsToEightySeconds) {
  const std::vector<double> buckets = InterTokenLatencyBuckets();
  ASSERT_EQ(buckets.size(), 19u);
  EXPECT_EQ(buckets.front(), 0.01);
  EXPECT_EQ(buckets.back(), 80);
  EXPECT_TRUE(std::is_sorted(buckets.begin(), buckets.end()));
}

TEST(VllmBuckets, RequestLatencySpansThreeHundredMillisecondsToTwoHours) {
  const std::vector<double> buckets = RequestLatencyBuckets();
  ASSERT_EQ(buckets.size(), 21u);
  EXPECT_EQ(buckets.front(), 0.3);
  EXPECT_EQ(buckets.back(), 7680);
  EXPECT_TRUE(std::is_sorted(buckets.begin(), buckets.end()));
}

}  // namespace
}  // namespace specd::metrics
