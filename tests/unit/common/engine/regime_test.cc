// Requests are classified by prompt length into the three regimes.
#include "common/engine/regime.h"

#include "gtest/gtest.h"

namespace specd::engine {
namespace {

TEST(RegimeTest, EachNominalWorkloadFallsInItsOwnRegime) {
  for (const RegimeWorkload& workload : NominalWorkloads()) {
    EXPECT_EQ(ClassifyRegime(workload.prompt_tokens), workload.regime)
        << RegimeName(workload.regime);
  }
}

TEST(RegimeTest, BoundariesLieBetweenTheNominalLengths) {
  EXPECT_EQ(ClassifyRegime(511), Regime::kShort);
  EXPECT_EQ(ClassifyRegime(512), Regime::kMedium);
  EXPECT_EQ(ClassifyRegime(4095), Regime::kMedium);
  EXPECT_EQ(ClassifyRegime(4096), Regime::kLong);
}

TEST(RegimeTest, ThresholdsAreConfigurable) {
  const RegimeThresholds thresholds{.medium_from = 100, .long_from = 1000};
  EXPECT_EQ(ClassifyRegime(99, thresholds), Regime::kShort);
  EXPECT_EQ(ClassifyRegime(100, thresholds), Regime::kMedium);
  EXPECT_EQ(ClassifyRegime(1000, thresholds), Regime::kLong);
}

TEST(RegimeTest, NamesAreTheMetricLabels) {
  EXPECT_STREQ(RegimeName(Regime::kShort), "short");
  EXPECT_STREQ(RegimeName(Regime::kMedium), "medium");
  EXPECT_STREQ(RegimeName(Regime::kLong), "long");
}

}  // namespace
}  // namespace specd::engine
