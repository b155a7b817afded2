#pragma once
// Wall-clock intervals for timings, latencies and acceptance statistics.
#include <chrono>

namespace specd::base {

using Clock = std::chrono::steady_clock;

inline double Milliseconds(Clock::duration interval) {
  return std::chrono::duration<double, std::milli>(interval).count();
}

inline double MillisecondsSince(Clock::time_point start) {
  return Milliseconds(Clock::now() - start);
}

}  // namespace specd::base
