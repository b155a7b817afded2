#pragma once
// A monotonically increasing value (requests served, tokens drafted). Updates are lock-free so
// request handlers never wait on a scrape.
#include <atomic>

namespace specd::metrics {

class Counter {
 public:
  // `amount` must be >= 0 (and not NaN): a counter that goes down breaks rate(); aborts otherwise.
  void Increment(double amount = 1);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

}  // namespace specd::metrics
