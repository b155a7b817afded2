#include "kernels/cpu/sampling.h"

// GCC 12 flags the `_mm512_undefined_*` inside its own AVX-512 intrinsics as uninitialized when
// they are inlined into target("avx512f") functions (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/lane_fold.h"
#include "kernels/cpu/vector_exp.h"

namespace specd::kernels::cpu {
namespace {

#define SPECD_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

constexpr int64_t kBlock = 1024;  // floats summed in lanes before the total goes on in double
constexpr float kLowestExponent = -87.0f;  // VectorExp's floor: below it, the mass is 0

SPECD_VECTOR_CLONES float Max(const float* x, int64_t n) {
  const std::array<float, kLanes> lanes =
      FoldLanes(x, n, -std::numeric_limits<float>::infinity(),
                [](float largest, float value) { return value > largest ? value : largest; });
  return *std::max_element(lanes.begin(), lanes.end());
}

// How many entries of a block are at or above `floor` (exact in float32 at a block's size).
SPECD_VECTOR_CLONES float BlockCount(const float* x, int64_t n, float floor) {
  return LaneSum(FoldLanes(x, n, 0, [floor](float count, float value) {
    return count + static_cast<float>(value >= floor);
  }));
}

// The sum of a block's entries at or above `floor` (−∞: all), which are finite.
SPECD_VECTOR_CLONES float BlockMass(const float* x, int64_t n, float floor) {
  return LaneSum(FoldLanes(x, n, 0, [floor](float mass, float value) {
    return mass + value * static_cast<float>(value >= floor);
  }));
}

// `block` over x a block at a time, the blocks' results summed in double.
template <typename Block>
double OverBlocks(const float* x, int64_t n, const Block& block) {
  double total = 0;
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    total += block(x + begin, std::min(kBlock, n - begin));
  }
  return total;
}

double Sum(const float* x, int64_t n) {
  return OverBlocks(x, n, [](const float* block, int64_t size) {
    return BlockMass(block, size, -std::numeric_limits<float>::infinity());
  });
}

// exp((score − largest) / temperature) for the scores at or above `floor`, 0 for the rest.
SPECD_VECTOR_CLONES void Exponentials(const float* scores, int64_t n, float largest,
                                      float inverse_temperature, float floor, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = (scores[i] - largest) * inverse_temperature;
    out[i] = scores[i] >= floor && x > kLowestExponent ? VectorExp(x) : 0.0f;
  }
}

SPECD_VECTOR_CLONES void ZeroBelow(float* x, int64_t n, float floor) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] >= floor ? x[i] : 0.0f;
}

SPECD_VECTOR_CLONES void Scale(float* x, int64_t n, float factor) {
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

void IndicesAtLeastScalar(const float* x, int64_t begin, int64_t end, float floor,
                          std::vector<int64_t>& out) {
  for (int64_t i = begin; i < end; ++i) {
    if (x[i] >= floor) out.push_back(i);
  }
}

// Sixteen comparisons at a time: most chunks have none at or above the floor.
__attribute__((target("avx512f"))) void IndicesAtLeastAvx512(const float* x, int64_t n, float floor,
                                                             std::vector<int64_t>& out) {
  const __m512 floors = _mm512_set1_ps(floor);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (__mmask16 found = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), floors, _CMP_GE_OQ);
         found != 0; found &= found - 1) {
      out.push_back(i + __builtin_ctz(found));
    }
  }
  IndicesAtLeastScalar(x, i, n, floor, out);
}

std::vector<int64_t> IndicesAtLeast(const float* x, int64_t n, float floor) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  std::vector<int64_t> indices;
  if (avx512) {
    IndicesAtLeastAvx512(x, n, floor, indices);
  } else {
    IndicesAtLeastScalar(x, 0, n, floor, indices);
  }
  return indices;
}

// A floor under the k largest scores with few others above it: the largest less 1, 2, 4, …
// until k are at or above it, each try one vectorised pass.
float TopKBound(const float* scores, int64_t n, float largest, int64_t k) {
  for (float drop = 1;; drop *= 2) {
    const float floor = largest - drop;
    if (!(floor > -std::numeric_limits<float>::infinity())) {
      return -std::numeric_limits<float>::infinity();
    }
    const double count = OverBlocks(scores, n, [&](const float* block, int64_t size) {
      return BlockCount(block, size, floor);
    });
    if (count >= static_cast<double>(k)) return floor;
  }
}

// A floor under the top-p set of exponentials (the largest 1): 2⁻⁴, 2⁻⁸, … until those at or above
// it hold `target`; past float32's normal range, every one with some mass.
float TopPBound(const float* exponentials, int64_t n, double target) {
  const auto mass_at_least = [&](float floor) {
    return OverBlocks(exponentials, n, [&](const float* block, int64_t size) {
      return BlockMass(block, size, floor);
    });
  };
  float floor = 1;
  do {
    floor /= 16;
  } while (floor > 0x1p-126f && mass_at_least(floor) < target);
  return floor;
}

// A float's bits as an unsigned key that orders as the floats do (−0 just below +0; no NaN).
uint32_t OrderKey(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

float FromOrderKey(uint32_t key) {
  const uint32_t bits = (key & 0x80000000u) != 0 ? key & 0x7fffffffu : ~key;
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// Where the candidates, ranked from the largest value, first gather `target` weight: the value of
// the one that reaches it, the weight of those strictly above that value, and those equal to it,
// lowest index first. Past their total weight (rounding): the smallest value with some.
struct Cut {
  float value = 0;
  double above = 0;
  std::vector<int64_t> ties;
};

// A radix select on the values' keys, a digit at a time (12, 12, then 8 bits): a histogram of the
// weight over the candidates that match the digits so far, walked down from the largest digit.
template <typename Weight>
Cut FindCut(const float* values, std::vector<int64_t> candidates, double target,
            const Weight& weight) {
  struct Digit {
    int shift, bits;
  };
  constexpr Digit kDigits[] = {{20, 12}, {8, 12}, {0, 8}};
  uint32_t key = 0;
  double above = 0;
  std::vector<double> histogram;
  for (const Digit digit : kDigits) {
    const uint32_t mask = (1u << digit.bits) - 1;
    const auto digit_of = [&](int64_t i) { return (OrderKey(values[i]) >> digit.shift) & mask; };
    histogram.assign(mask + 1, 0.0);
    for (const int64_t i : candidates) histogram[digit_of(i)] += weight(values[i]);
    int64_t chosen = -1;
    double gathered = above;
    for (int64_t d = mask; d >= 0; --d) {
      if (histogram[d] <= 0) continue;
      chosen = d;
      if (gathered + histogram[d] >= target) break;
      gathered += histogram[d];
    }
    if (chosen < 0) return {.value = FromOrderKey(key), .above = above, .ties = {}};
    // Past the total, every candidate stays: nothing is above the smallest.
    above = gathered + histogram[chosen] >= target ? gathered : gathered - histogram[chosen];
    key |= static_cast<uint32_t>(chosen) << digit.shift;
    std::erase_if(candidates,
                  [&](int64_t i) { return digit_of(i) != static_cast<uint32_t>(chosen); });
  }
  return {.value = FromOrderKey(key), .above = above, .ties = std::move(candidates)};
}

}  // namespace

void TruncatedSoftmax(const float* scores, int64_t n, const Truncation& truncation, float* out) {
  const float largest = Max(scores, n);
  float floor = -std::numeric_limits<float>::infinity();
  std::vector<int64_t> top_k;  // when top-k truncates: the entries it keeps, which top-p ranks
  if (truncation.top_k > 0 && truncation.top_k < n) {
    top_k = IndicesAtLeast(scores, n, TopKBound(scores, n, largest, truncation.top_k));
    floor = FindCut(scores, top_k, static_cast<double>(truncation.top_k), [](float) {
              return 1.0;
            }).value;
    std::erase_if(top_k, [&](int64_t i) { return scores[i] < floor; });
  }
  // The largest score's exponential is exactly 1: min-p's bar is min_p itself.
  Exponentials(scores, n, largest, static_cast<float>(1 / truncation.temperature), floor, out);
  if (truncation.top_p < 1 || truncation.min_p > 0) {
    float bar = static_cast<float>(truncation.min_p);
    double target = 0;
    Cut cut;
    if (truncation.top_p < 1) {
      target = truncation.top_p * Sum(out, n);
      cut = FindCut(out, top_k.empty() ? IndicesAtLeast(out, n, TopPBound(out, n, target)) : top_k,
                    target, [](float e) { return e; });
      bar = std::max(bar, cut.value);
    }
    ZeroBelow(out, n, bar);
    // A probability equal to the cut's stays while those ranked above it hold less than top_p.
    double ranked_above = cut.above;
    for (const int64_t i : cut.ties) {
      if (ranked_above >= target) out[i] = 0;
      ranked_above += cut.value;
    }
  }
  Scale(out, n, static_cast<float>(1.0 / Sum(out, n)));
}

int64_t InverseCdf(const float* probabilities, int64_t n, double u) {
  double below = 0;
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t end = std::min(n, begin + kBlock);
    const double block =
        BlockMass(probabilities + begin, end - begin, -std::numeric_limits<float>::infinity());
    if (below + block <= u) {
      below += block;
      continue;
    }
    for (int64_t i = begin; i < end; ++i) {
      below += probabilities[i];
      if (below > u) return i;
    }
  }
  for (int64_t i = n - 1; i > 0; --i) {
    if (probabilities[i] > 0) return i;
  }
  return 0;
}

}  // namespace specd::kernels::cpu
