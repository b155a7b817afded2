#pragma once
// A distribution of observed values counted into fixed buckets (latencies), plus their sum.
// Observe() is lock-free: one atomic increment per bucket hit, one atomic add to the sum.
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace specd::metrics {

class Histogram {
 public:
  // `bucket_upper_bounds` strictly increasing and finite; the +Inf bucket is implicit.
  explicit Histogram(std::vector<double> bucket_upper_bounds);

  // Aborts with a message unless the bounds are finite and strictly increasing.
  static void CheckBucketUpperBounds(const std::vector<double>& bucket_upper_bounds);

  void Observe(double value);
  uint64_t count() const;
  double sum() const { return sum_.load(std::memory_order_relaxed); }

  const std::vector<double>& bucket_upper_bounds() const { return upper_bounds_; }
  // Cumulative counts, one per upper bound followed by the +Inf bucket (which equals the count
  // reported alongside, so a scrape is self-consistent even while observations race with it).
  std::vector<uint64_t> CumulativeCounts() const;

 private:
  std::vector<double> upper_bounds_;
  // Per-bucket (not cumulative) counts; the last one is the +Inf bucket.
  std::unique_ptr<std::atomic<uint64_t>[]> bucket_counts_;
  std::atomic<double> sum_{0};
};

}  // namespace specd::metrics
