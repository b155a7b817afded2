#pragma once
// A value that goes up and down (requests in flight, KV-cache blocks used). Updates are lock-free.
#include <atomic>

namespace specd::metrics {

class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double delta) { value_.fetch_add(delta, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

}  // namespace specd::metrics
