#pragma once
// A fold over a row into kLanes independent partial results, lane l taking entries l, l + kLanes,
// … (the tail lane 0): chains a loop vectorises into without reassociating floats. Inlined into
// its caller, so the caller's target clone picks the vector width.
#include <array>
#include <cstdint>

namespace specd::kernels::cpu {

inline constexpr int kLanes = 16;

template <typename Fold>
[[gnu::always_inline]] inline std::array<float, kLanes> FoldLanes(const float* x, int64_t n,
                                                                  float initial, const Fold& fold) {
  std::array<float, kLanes> lanes;
  lanes.fill(initial);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] = fold(lanes[l], x[i + l]);
  }
  for (; i < n; ++i) lanes[0] = fold(lanes[0], x[i]);
  return lanes;
}

[[gnu::always_inline]] inline float LaneSum(const std::array<float, kLanes>& lanes) {
  float sum = 0;
  for (const float lane : lanes) sum += lane;
  return sum;
}

}  // namespace specd::kernels::cpu
