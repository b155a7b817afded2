#pragma once
// The two passes a sampled token takes over a row of logits (Qwen3.5's vocabulary: ~250k columns):
// the truncated distribution it is drawn from, and the draw. LibTorch's composition of them (a
// softmax, a full sort of the row for top-p, a top-k, a cumulative sum and a search, each a new
// tensor, on one thread) added 4–8 ms to a 28 ms decode step of the 0.8B shape; these take a few
// vectorised passes over the row, 0.2–0.4 ms. One thread each: a batch's requests draw on their
// own threads.
//
// TruncatedSoftmax: softmax(scores / temperature) over the top_k largest scores (0: all; every
// score equal to the k-th stays), then over the smallest set of the most likely tokens whose mass
// reaches top_p (1: all; the most likely stays; among equal probabilities the lower index ranks
// first), then over those of at least min_p × the largest probability; renormalised. A score of
// −∞ gets none of the mass, nor one whose exponential is under e^−87 of the largest's (float32's
// underflow). Statistics in float32, sums in double; the exponential is VectorExp.
//
// InverseCdf: the first index whose cumulative probability exceeds u (a uniform draw in [0, 1)),
// or, when rounding leaves u past the last of the mass, the last index with some.
#include <cstdint>

namespace specd::kernels::cpu {

struct Truncation {
  double temperature = 1;  // > 0
  int64_t top_k = 0;
  double top_p = 1;
  double min_p = 0;
};

// scores, out [n] (n > 0); out may not be scores.
void TruncatedSoftmax(const float* scores, int64_t n, const Truncation& truncation, float* out);

int64_t InverseCdf(const float* probabilities, int64_t n, double u);

}  // namespace specd::kernels::cpu
