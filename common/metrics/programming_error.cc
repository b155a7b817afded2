#include "common/metrics/programming_error.h"

#include <cstdio>
#include <cstdlib>

namespace specd::metrics {

void AbortOnProgrammingError(const std::string& message) {
  std::fprintf(stderr, "specd::metrics: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace specd::metrics
