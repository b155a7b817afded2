#pragma once
// Wall-clock intervals for timings, latencies and acceptance statistics.
#include <chrono>

namespace specd::base {

using Clock = std::chrono::steady_clock;

inline double MillisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace specd::base
