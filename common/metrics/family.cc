#include "common/metrics/family.h"

#include <mutex>
#include <type_traits>

#include "common/metrics/programming_error.h"
#include "common/metrics/text_format.h"

namespace specd::metrics {
namespace {

std::string JoinNames(const std::vector<std::string>& names) {
  std::string joined;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) joined += ", ";
    joined += names[i];
  }
  return joined;
}

std::vector<Label> LabelsOf(const std::vector<std::string>& names,
                            const std::vector<std::string>& values) {
  std::vector<Label> labels;
  labels.reserve(names.size() + 1);  // room for a histogram's "le"
  for (size_t i = 0; i < names.size(); ++i) labels.push_back({names[i], values[i]});
  return labels;
}

void AppendChild(std::string& out, const std::string& name, const std::vector<Label>& labels,
                 const Counter& counter) {
  AppendSample(out, name, labels, counter.value());
}

void AppendChild(std::string& out, const std::string& name, const std::vector<Label>& labels,
                 const Gauge& gauge) {
  AppendSample(out, name, labels, gauge.value());
}

void AppendChild(std::string& out, const std::string& name, std::vector<Label> labels,
                 const Histogram& histogram) {
  // Read the buckets once so every line of this child agrees: +Inf bucket == _count.
  const std::vector<uint64_t> cumulative = histogram.CumulativeCounts();
  const std::vector<double>& bounds = histogram.bucket_upper_bounds();
  const std::string bucket_name = name + "_bucket";
  labels.push_back({"le", ""});
  for (size_t i = 0; i < cumulative.size(); ++i) {
    const std::string le = i < bounds.size() ? FormatValue(bounds[i]) : "+Inf";
    labels.back().value = le;
    AppendSample(out, bucket_name, labels, static_cast<double>(cumulative[i]));
  }
  labels.pop_back();
  AppendSample(out, name + "_sum", labels, histogram.sum());
  AppendSample(out, name + "_count", labels, static_cast<double>(cumulative.back()));
}

}  // namespace

const char* MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

template <typename Metric>
Metric& Family<Metric>::WithLabels(const std::vector<std::string>& values) {
  if (values.size() != label_names().size()) {
    AbortOnProgrammingError(name() + " has " + std::to_string(label_names().size()) +
                            " label(s) [" + JoinNames(label_names()) + "] but was given " +
                            std::to_string(values.size()) + " value(s) [" + JoinNames(values) +
                            "]");
  }
  {
    std::shared_lock lock(mutex_);
    auto it = children_.find(values);
    if (it != children_.end()) return *it->second;
  }
  std::unique_lock lock(mutex_);
  auto [it, inserted] = children_.try_emplace(values);
  if (inserted) it->second = make_child_();
  return *it->second;
}

template <typename Metric>
MetricType Family<Metric>::type() const {
  if constexpr (std::is_same_v<Metric, Counter>) {
    return MetricType::kCounter;
  } else if constexpr (std::is_same_v<Metric, Gauge>) {
    return MetricType::kGauge;
  } else {
    static_assert(std::is_same_v<Metric, Histogram>);
    return MetricType::kHistogram;
  }
}

template <typename Metric>
void Family<Metric>::AppendExposition(std::string& out) const {
  AppendHeader(out, name(), help(), MetricTypeName(type()));
  std::shared_lock lock(mutex_);
  for (const auto& [values, child] : children_) {
    AppendChild(out, name(), LabelsOf(label_names(), values), *child);
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

}  // namespace specd::metrics
