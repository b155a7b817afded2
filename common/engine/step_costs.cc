#include "common/engine/step_costs.h"

#include <algorithm>
#include <bit>

namespace specd::engine {
namespace {

// Later samples move a mean by this share: about the last 16 steps count.
constexpr double kWeight = 1.0 / 16;

}  // namespace

void StepCosts::Mean::Add(double value, int64_t step) {
  ++samples;
  ms += (value - ms) * std::max(kWeight, 1.0 / static_cast<double>(samples));
  at_step = step;
}

std::optional<int64_t> StepCosts::Mean::AgeAt(int64_t step) const {
  if (samples == 0) return std::nullopt;
  return step - at_step;
}

size_t StepCosts::BucketOf(int64_t batch) {
  // 1, 2, 3–4, 5–8, 9–16, …
  return std::bit_width(static_cast<uint64_t>(std::max<int64_t>(batch, 1) - 1));
}

StepCosts::Bucket& StepCosts::At(int64_t batch) {
  const size_t bucket = BucketOf(batch);
  if (buckets_.size() <= bucket) buckets_.resize(bucket + 1);
  return buckets_[bucket];
}

const StepCosts::Bucket* StepCosts::Find(int64_t batch) const {
  const size_t bucket = BucketOf(batch);
  return bucket < buckets_.size() ? &buckets_[bucket] : nullptr;
}

void StepCosts::RecordVerify(int64_t batch, int64_t block, double ms) {
  Bucket& bucket = At(batch);
  ++bucket.steps;
  if (static_cast<int64_t>(bucket.verify.size()) < block) bucket.verify.resize(block);
  bucket.verify[block - 1].Add(ms, bucket.steps);
}

void StepCosts::RecordDraft(int64_t batch, double ms) {
  Bucket& bucket = At(batch);
  bucket.draft.Add(ms, bucket.steps);
}

std::optional<double> StepCosts::VerifyMs(int64_t batch, double block) const {
  const Bucket* bucket = Find(batch);
  if (bucket == nullptr) return std::nullopt;
  // The measured sizes nearest below and above `block`.
  const Mean* below = nullptr;
  const Mean* above = nullptr;
  double below_size = 0;
  double above_size = 0;
  const Mean* first = nullptr;
  double first_size = 0;
  for (size_t i = 0; i < bucket->verify.size(); ++i) {
    const Mean& mean = bucket->verify[i];
    if (mean.samples == 0) continue;
    const auto size = static_cast<double>(i + 1);
    if (first == nullptr) {
      first = &mean;
      first_size = size;
    }
    if (size <= block) {
      below = &mean;
      below_size = size;
    } else if (above == nullptr) {
      above = &mean;
      above_size = size;
    }
  }
  if (below == nullptr && above == nullptr) return std::nullopt;
  if (below == nullptr) return above->ms;  // smaller than any measured: no cheaper than it
  if (above == nullptr) {
    // Larger than any measured: on the line through the smallest and largest measured sizes.
    if (below == first) return below->ms;
    const double slope = std::max(0.0, (below->ms - first->ms) / (below_size - first_size));
    return below->ms + slope * (block - below_size);
  }
  return below->ms + (above->ms - below->ms) * (block - below_size) / (above_size - below_size);
}

std::optional<double> StepCosts::DraftMs(int64_t batch) const {
  const Bucket* bucket = Find(batch);
  if (bucket == nullptr || bucket->draft.samples == 0) return std::nullopt;
  return bucket->draft.ms;
}

std::optional<int64_t> StepCosts::VerifyAge(int64_t batch, int64_t block) const {
  const Bucket* bucket = Find(batch);
  if (bucket == nullptr || static_cast<int64_t>(bucket->verify.size()) < block) return std::nullopt;
  return bucket->verify[block - 1].AgeAt(bucket->steps);
}

std::optional<int64_t> StepCosts::DraftAge(int64_t batch) const {
  const Bucket* bucket = Find(batch);
  if (bucket == nullptr) return std::nullopt;
  return bucket->draft.AgeAt(bucket->steps);
}

}  // namespace specd::engine
