#include "common/metrics/histogram.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/metrics/programming_error.h"
#include "common/metrics/text_format.h"

namespace specd::metrics {

void Histogram::CheckBucketUpperBounds(const std::vector<double>& bounds) {
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) {
      AbortOnProgrammingError("histogram bucket bound " + FormatValue(bounds[i]) +
                              " is not finite; the +Inf bucket is always present");
    }
    if (i > 0 && !(bounds[i - 1] < bounds[i])) {
      AbortOnProgrammingError("histogram bucket bounds must increase strictly, got " +
                              FormatValue(bounds[i - 1]) + " then " + FormatValue(bounds[i]));
    }
  }
}

Histogram::Histogram(std::vector<double> bucket_upper_bounds)
    : upper_bounds_(std::move(bucket_upper_bounds)),
      bucket_counts_(new std::atomic<uint64_t>[upper_bounds_.size() + 1]) {
  CheckBucketUpperBounds(upper_bounds_);
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) bucket_counts_[i].store(0);
}

void Histogram::Observe(double value) {
  // A bucket counts values <= its upper bound; NaN compares false everywhere and lands in +Inf.
  const size_t bucket = std::isnan(value)
                            ? upper_bounds_.size()
                            : std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) -
                                  upper_bounds_.begin();
  bucket_counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

uint64_t Histogram::count() const {
  uint64_t total = 0;
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
    total += bucket_counts_[i].load(std::memory_order_relaxed);
  }
  return total;
}

std::vector<uint64_t> Histogram::CumulativeCounts() const {
  std::vector<uint64_t> cumulative(upper_bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i < cumulative.size(); ++i) {
    running += bucket_counts_[i].load(std::memory_order_relaxed);
    cumulative[i] = running;
  }
  return cumulative;
}

}  // namespace specd::metrics
