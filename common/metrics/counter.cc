#include "common/metrics/counter.h"

#include <string>

#include "common/metrics/programming_error.h"
#include "common/metrics/text_format.h"

namespace specd::metrics {

void Counter::Increment(double amount) {
  if (!(amount >= 0)) {  // also rejects NaN
    AbortOnProgrammingError("Counter::Increment(" + FormatValue(amount) +
                            "): a counter only goes up; use a Gauge for values that go down");
  }
  value_.fetch_add(amount, std::memory_order_relaxed);
}

}  // namespace specd::metrics
