#include "common/metrics/exposition.h"

#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

namespace specd::metrics {

std::string Exposition(const prometheus::Collectable& metrics) {
  return prometheus::TextSerializer().Serialize(metrics.Collect());
}

}  // namespace specd::metrics
