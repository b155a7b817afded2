#pragma once
// e^x to about a float's precision in operations every vector unit has, so that a loop calling it
// vectorises (one calling std::exp would not): x = n ln 2 + r, e^r by Cephes' expf polynomial,
// 2^n built in the exponent bits. x is clamped to where 2^n stays a normal float.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace specd::kernels::cpu {

inline float VectorExp(float x) {
  x = std::clamp(x, -87.0f, 88.0f);
  const float n = std::nearbyint(x * 1.44269504088896341f);
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;  // ln 2 in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const auto bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

// silu(g) = g · sigmoid(g).
inline float VectorSilu(float g) { return g / (1.0f + VectorExp(-g)); }

}  // namespace specd::kernels::cpu
