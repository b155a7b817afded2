#pragma once
// Order statistics of the benchmarks' timings: on a noisy machine a median (or a p95) says more
// than a mean that one slow run can move.
#include <vector>

namespace specd::cli {

// The value `fraction` (0 … 1) of the way through `values` in sorted order, nearest rank; 0 for
// none.
double Percentile(std::vector<double> values, double fraction);

}  // namespace specd::cli
