#include "common/engine/acceptance_stats.h"

#include <numeric>

namespace specd::engine {

void AcceptanceStats::RecordStep(int64_t proposed, int64_t accepted, int64_t emitted) {
  acceptance_lengths.push_back(emitted);
  if (static_cast<int64_t>(proposed_at.size()) < proposed) {
    proposed_at.resize(proposed, 0);
    accepted_at.resize(proposed, 0);
  }
  for (int64_t i = 0; i < proposed; ++i) {
    ++proposed_at[i];
    if (i < accepted) ++accepted_at[i];
  }
}

double AcceptanceStats::tau() const {
  if (acceptance_lengths.empty()) return 0;
  const int64_t total =
      std::accumulate(acceptance_lengths.begin(), acceptance_lengths.end(), int64_t{0});
  return static_cast<double>(total) / static_cast<double>(acceptance_lengths.size());
}

}  // namespace specd::engine
