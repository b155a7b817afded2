#pragma once
// A named metric with label dimensions: one child metric per distinct tuple of label values.
// Callers should look a child up once and keep the reference; updating it takes no lock.
#include <functional>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "common/metrics/counter.h"
#include "common/metrics/gauge.h"
#include "common/metrics/histogram.h"

namespace specd::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };
// As the TYPE line spells it: "counter", "gauge", "histogram".
const char* MetricTypeName(MetricType type);

// What the Registry keeps for every family, whatever its metric type.
class FamilyBase {
 public:
  FamilyBase(std::string name, std::string help, std::vector<std::string> label_names)
      : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)) {}
  virtual ~FamilyBase() = default;
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;

  virtual MetricType type() const = 0;
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  // Appends `# HELP`, `# TYPE` and one block of samples per child, children sorted by label
  // values, in Prometheus text format 0.0.4.
  virtual void AppendExposition(std::string& out) const = 0;

 private:
  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
};

template <typename Metric>
class Family final : public FamilyBase {
 public:
  // Created by Registry, which validates the name and label names.
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::function<std::unique_ptr<Metric>()> make_child)
      : FamilyBase(std::move(name), std::move(help), std::move(label_names)),
        make_child_(std::move(make_child)) {}

  // The child with these label values, in label_names order; created on first use. Aborts with
  // a message when the number of values differs from the number of label names.
  Metric& WithLabels(const std::vector<std::string>& values);
  // The only child of a family without label names.
  Metric& Get() { return WithLabels({}); }

  MetricType type() const override;
  void AppendExposition(std::string& out) const override;

 private:
  std::function<std::unique_ptr<Metric>()> make_child_;
  // Shared for lookups of existing children, exclusive only while a new child is inserted.
  mutable std::shared_mutex mutex_;
  std::map<std::vector<std::string>, std::unique_ptr<Metric>> children_;
};

extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

}  // namespace specd::metrics
