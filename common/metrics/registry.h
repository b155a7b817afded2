#pragma once
// The set of metric families a process exports, and their Prometheus text exposition (0.0.4).
// Register families once at start-up; update children from any thread.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/metrics/counter.h"
#include "common/metrics/family.h"
#include "common/metrics/gauge.h"
#include "common/metrics/histogram.h"
#include "common/metrics/vllm_buckets.h"

namespace specd::metrics {

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Names follow Prometheus rules ([a-zA-Z_:][a-zA-Z0-9_:]*) and counter names end in _total;
  // label names match [a-zA-Z_][a-zA-Z0-9_]*, do not start with "__" and are distinct.
  // Registering the same name again returns the existing family when type, label names and
  // buckets match; anything else (a mismatch, an invalid name, a name whose samples collide with
  // another family's, such as a gauge "x_count" beside a histogram "x") aborts with a message.
  Family<Counter>& AddCounter(const std::string& name, const std::string& help,
                              std::vector<std::string> label_names = {});
  Family<Gauge>& AddGauge(const std::string& name, const std::string& help,
                          std::vector<std::string> label_names = {});
  // Bucket upper bounds strictly increasing and finite (the +Inf bucket is implicit); a
  // histogram may not use the label name "le".
  Family<Histogram>& AddHistogram(const std::string& name, const std::string& help,
                                  std::vector<double> bucket_upper_bounds,
                                  std::vector<std::string> label_names = {});

  // Prometheus text exposition of every family, families in registration order, children
  // sorted by label values.
  std::string Exposition() const;

 private:
  // Returns the family registered under `name` after checking it matches, or nullptr.
  FamilyBase* FindMatching(const std::string& name, MetricType type,
                           const std::vector<std::string>& label_names,
                           const std::vector<double>* bucket_upper_bounds) const;
  // Claims the sample names of a new family and stores it.
  FamilyBase& Insert(std::unique_ptr<FamilyBase> family, std::vector<double> bucket_upper_bounds);

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<FamilyBase>> families_;  // registration order
  std::vector<std::vector<double>> buckets_;           // parallel to families_ (empty if none)
};

}  // namespace specd::metrics
