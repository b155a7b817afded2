#include "common/engine/acceptance_stats.h"

#include <cstddef>
#include <numeric>

namespace specd::engine {

void AcceptanceStats::RecordStep(int64_t proposed, int64_t accepted, int64_t emitted) {
  acceptance_lengths.push_back(emitted);
  if (proposed == 0) ++target_only_steps;
  if (static_cast<int64_t>(proposed_at.size()) < proposed) {
    proposed_at.resize(proposed, 0);
    accepted_at.resize(proposed, 0);
  }
  for (int64_t i = 0; i < proposed; ++i) {
    ++proposed_at[i];
    if (i < accepted) ++accepted_at[i];
  }
}

void AcceptanceStats::Merge(const AcceptanceStats& other) {
  acceptance_lengths.insert(acceptance_lengths.end(), other.acceptance_lengths.begin(),
                            other.acceptance_lengths.end());
  if (proposed_at.size() < other.proposed_at.size()) {
    proposed_at.resize(other.proposed_at.size(), 0);
    accepted_at.resize(other.proposed_at.size(), 0);
  }
  for (size_t i = 0; i < other.proposed_at.size(); ++i) {
    proposed_at[i] += other.proposed_at[i];
    accepted_at[i] += other.accepted_at[i];
  }
  target_only_steps += other.target_only_steps;
  draft_ms += other.draft_ms;
  verify_ms += other.verify_ms;
}

double AcceptanceStats::tau() const {
  if (acceptance_lengths.empty()) return 0;
  const int64_t total =
      std::accumulate(acceptance_lengths.begin(), acceptance_lengths.end(), int64_t{0});
  return static_cast<double>(total) / static_cast<double>(acceptance_lengths.size());
}

}  // namespace specd::engine
