#include "common/metrics/registry.h"

#include <algorithm>

#include "common/metrics/programming_error.h"
#include "common/metrics/text_format.h"

namespace specd::metrics {
namespace {

bool IsLetterOrUnderscore(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool IsValidMetricName(const std::string& name) {
  if (name.empty() || IsDigit(name[0])) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return IsLetterOrUnderscore(c) || IsDigit(c) || c == ':'; });
}

// [a-zA-Z_][a-zA-Z0-9_]*, and "__" prefixes are reserved for Prometheus itself.
bool IsValidLabelName(const std::string& name) {
  if (name.empty() || IsDigit(name[0]) || name.starts_with("__")) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return IsLetterOrUnderscore(c) || IsDigit(c); });
}

std::string Describe(MetricType type, const std::vector<std::string>& label_names,
                     const std::vector<double>* bucket_upper_bounds) {
  std::string description = std::string("a ") + MetricTypeName(type) + " with labels [";
  for (size_t i = 0; i < label_names.size(); ++i) {
    description += (i > 0 ? ", " : "") + label_names[i];
  }
  description += "]";
  if (bucket_upper_bounds != nullptr) {
    description += " and buckets [";
    for (size_t i = 0; i < bucket_upper_bounds->size(); ++i) {
      description += (i > 0 ? ", " : "") + FormatValue((*bucket_upper_bounds)[i]);
    }
    description += "]";
  }
  return description;
}

void CheckNames(const std::string& name, MetricType type,
                const std::vector<std::string>& label_names) {
  if (!IsValidMetricName(name)) {
    AbortOnProgrammingError("\"" + name +
                            "\" is not a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)");
  }
  if (type == MetricType::kCounter && !name.ends_with("_total")) {
    AbortOnProgrammingError("counter \"" + name + "\" must end in _total");
  }
  for (size_t i = 0; i < label_names.size(); ++i) {
    const std::string& label = label_names[i];
    if (!IsValidLabelName(label)) {
      AbortOnProgrammingError(
          "metric \"" + name + "\": \"" + label +
          "\" is not a valid label name ([a-zA-Z_][a-zA-Z0-9_]*, no leading __)");
    }
    if (type == MetricType::kHistogram && label == "le") {
      AbortOnProgrammingError("histogram \"" + name +
                              "\" may not use the label name \"le\"; its buckets use it");
    }
    if (std::find(label_names.begin(), label_names.begin() + i, label) != label_names.begin() + i) {
      AbortOnProgrammingError("metric \"" + name + "\" lists label \"" + label + "\" twice");
    }
  }
}

// The names of the sample lines a family writes; two families must never share one.
std::vector<std::string> SampleNames(const std::string& name, MetricType type) {
  if (type != MetricType::kHistogram) return {name};
  return {name, name + "_bucket", name + "_sum", name + "_count"};
}

}  // namespace

Family<Counter>& Registry::AddCounter(const std::string& name, const std::string& help,
                                      std::vector<std::string> label_names) {
  CheckNames(name, MetricType::kCounter, label_names);
  std::lock_guard lock(mutex_);
  if (FamilyBase* existing = FindMatching(name, MetricType::kCounter, label_names, nullptr)) {
    return static_cast<Family<Counter>&>(*existing);
  }
  return static_cast<Family<Counter>&>(
      Insert(std::make_unique<Family<Counter>>(name, help, std::move(label_names),
                                               [] { return std::make_unique<Counter>(); }),
             {}));
}

Family<Gauge>& Registry::AddGauge(const std::string& name, const std::string& help,
                                  std::vector<std::string> label_names) {
  CheckNames(name, MetricType::kGauge, label_names);
  std::lock_guard lock(mutex_);
  if (FamilyBase* existing = FindMatching(name, MetricType::kGauge, label_names, nullptr)) {
    return static_cast<Family<Gauge>&>(*existing);
  }
  return static_cast<Family<Gauge>&>(
      Insert(std::make_unique<Family<Gauge>>(name, help, std::move(label_names),
                                             [] { return std::make_unique<Gauge>(); }),
             {}));
}

Family<Histogram>& Registry::AddHistogram(const std::string& name, const std::string& help,
                                          std::vector<double> bucket_upper_bounds,
                                          std::vector<std::string> label_names) {
  CheckNames(name, MetricType::kHistogram, label_names);
  Histogram::CheckBucketUpperBounds(bucket_upper_bounds);
  std::lock_guard lock(mutex_);
  if (FamilyBase* existing =
          FindMatching(name, MetricType::kHistogram, label_names, &bucket_upper_bounds)) {
    return static_cast<Family<Histogram>&>(*existing);
  }
  auto family = std::make_unique<Family<Histogram>>(
      name, help, std::move(label_names),
      [bounds = bucket_upper_bounds] { return std::make_unique<Histogram>(bounds); });
  return static_cast<Family<Histogram>&>(Insert(std::move(family), std::move(bucket_upper_bounds)));
}

FamilyBase* Registry::FindMatching(const std::string& name, MetricType type,
                                   const std::vector<std::string>& label_names,
                                   const std::vector<double>* bucket_upper_bounds) const {
  for (size_t i = 0; i < families_.size(); ++i) {
    FamilyBase& family = *families_[i];
    if (family.name() != name) continue;
    const bool same = family.type() == type && family.label_names() == label_names &&
                      (bucket_upper_bounds == nullptr || *bucket_upper_bounds == buckets_[i]);
    if (!same) {
      const bool is_histogram = family.type() == MetricType::kHistogram;
      AbortOnProgrammingError(
          "\"" + name + "\" is already registered as " +
          Describe(family.type(), family.label_names(), is_histogram ? &buckets_[i] : nullptr) +
          "; cannot register it again as " + Describe(type, label_names, bucket_upper_bounds));
    }
    return &family;
  }
  return nullptr;
}

FamilyBase& Registry::Insert(std::unique_ptr<FamilyBase> family,
                             std::vector<double> bucket_upper_bounds) {
  const std::vector<std::string> claimed = SampleNames(family->name(), family->type());
  for (const std::unique_ptr<FamilyBase>& existing : families_) {
    for (const std::string& taken : SampleNames(existing->name(), existing->type())) {
      if (std::find(claimed.begin(), claimed.end(), taken) != claimed.end()) {
        AbortOnProgrammingError(std::string(MetricTypeName(family->type())) + " \"" +
                                family->name() + "\" would write samples named \"" + taken +
                                "\", as " + MetricTypeName(existing->type()) + " \"" +
                                existing->name() + "\" already does");
      }
    }
  }
  families_.push_back(std::move(family));
  buckets_.push_back(std::move(bucket_upper_bounds));
  return *families_.back();
}

std::string Registry::Exposition() const {
  std::string out;
  std::lock_guard lock(mutex_);
  for (const std::unique_ptr<FamilyBase>& family : families_) family->AppendExposition(out);
  return out;
}

}  // namespace specd::metrics
