#pragma once
// Pearson's chi-square goodness of fit, for the tests that check a sampler's output distribution
// over a fixed set of seeds (so they are deterministic) at a threshold a wrong rule fails.
#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace specd::engine::testing {

struct ChiSquare {
  double statistic = 0;
  int64_t degrees_of_freedom = 0;
};

// Pearson's statistic of `counts` (a histogram over ids) against `probabilities` [ids]; bins
// expecting fewer than 5 draws are pooled into one.
inline ChiSquare PearsonChiSquare(const std::vector<int64_t>& counts,
                                  const at::Tensor& probabilities) {
  int64_t samples = 0;
  for (const int64_t count : counts) samples += count;
  ChiSquare result;
  double pooled_expected = 0;
  int64_t pooled_observed = 0;
  int64_t bins = 0;
  const auto add = [&](double expected, int64_t observed) {
    const double diff = static_cast<double>(observed) - expected;
    result.statistic += diff * diff / expected;
    ++bins;
  };
  for (size_t id = 0; id < counts.size(); ++id) {
    const double expected =
        static_cast<double>(samples) * probabilities[static_cast<int64_t>(id)].item<double>();
    if (expected >= 5) {
      add(expected, counts[id]);
    } else {
      pooled_expected += expected;
      pooled_observed += counts[id];
    }
  }
  if (pooled_expected > 0) add(pooled_expected, pooled_observed);
  result.degrees_of_freedom = bins - 1;
  return result;
}

// The chi-square value exceeded with probability 0.001 (Wilson–Hilferty approximation).
inline double CriticalValue(int64_t degrees_of_freedom) {
  const double k = static_cast<double>(degrees_of_freedom);
  const double z = 3.0902;  // the standard normal's 0.999 quantile
  const double a = 2 / (9 * k);
  return k * std::pow(1 - a + z * std::sqrt(a), 3);
}

// Success when the draws `ids` (each below probabilities.size(0)) fit `probabilities`.
inline ::testing::AssertionResult FitsDistribution(const std::vector<int64_t>& ids,
                                                   const at::Tensor& probabilities) {
  std::vector<int64_t> counts(probabilities.size(0), 0);
  for (const int64_t id : ids) ++counts.at(id);
  const ChiSquare chi = PearsonChiSquare(counts, probabilities);
  const double critical = CriticalValue(chi.degrees_of_freedom);
  ::testing::AssertionResult result =
      chi.statistic <= critical ? ::testing::AssertionSuccess() : ::testing::AssertionFailure();
  return result << "chi-square " << chi.statistic << " on " << chi.degrees_of_freedom
                << " degrees of freedom; critical value at 0.001: " << critical;
}

}  // namespace specd::engine::testing
