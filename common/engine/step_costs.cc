#include "common/engine/step_costs.h"

#include <algorithm>
#include <bit>

namespace specd::engine {
namespace {

// Later samples move a mean by this share: about the last 16 steps count.
constexpr double kWeight = 1.0 / 16;
// The verify line's samples fade by this factor per step: about the last 64 count.
constexpr double kLineFading = 1 - 1.0 / 64;

}  // namespace

void StepCosts::Mean::Add(double sample) {
  ++samples;
  value += (sample - value) * std::max(kWeight, 1.0 / static_cast<double>(samples));
}

void StepCosts::Line::Add(double sample_rows, double sample_ms) {
  for (double* sum : {&weight, &rows, &rows_squared, &ms, &rows_ms}) *sum *= kLineFading;
  weight += 1;
  rows += sample_rows;
  rows_squared += sample_rows * sample_rows;
  ms += sample_ms;
  rows_ms += sample_rows * sample_ms;
}

double StepCosts::Line::At(double at_rows) const {
  const double mean_rows = rows / weight;
  const double mean_ms = ms / weight;
  const double spread = rows_squared / weight - mean_rows * mean_rows;
  // Rows that never varied say nothing of the slope: flat until they do. Time never falls
  // with more rows.
  const double slope =
      spread < 1 ? 0 : std::max(0.0, (rows_ms / weight - mean_rows * mean_ms) / spread);
  return std::max(0.0, mean_ms + slope * (at_rows - mean_rows));
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

void StepCosts::RecordVerify(int64_t batch, int64_t own, int64_t forward_rows, double ms) {
  Bucket& bucket = At(batch);
  const int64_t step = ++bucket.steps;
  const int64_t rows = forward_rows > 0 ? std::max(forward_rows, own) : own * batch;
  bucket.verify.Add(static_cast<double>(rows), ms);
  if (own == 1) bucket.single_at_step = step;
}

void StepCosts::RecordDraft(int64_t batch, int64_t context_rows, double ms) {
  Bucket& bucket = At(batch);
  bucket.drafting.Add(static_cast<double>(context_rows), ms);
  bucket.drafted_at_step = bucket.steps;
}

void StepCosts::RecordIdleDraft(int64_t batch, double ms) { At(batch).idle_draft.Add(ms); }

std::optional<double> StepCosts::VerifyMs(int64_t batch, double rows) const {
  const Bucket* bucket = Find(batch);
  if (bucket == nullptr || bucket->verify.weight == 0) return std::nullopt;
  return bucket->verify.At(rows);
}

std::optional<double> StepCosts::DraftMs(int64_t batch, double context_rows) const {
  const Bucket* bucket = Find(batch);
  if (bucket == nullptr || bucket->drafting.weight == 0) return std::nullopt;
  return bucket->drafting.At(context_rows);
}

std::optional<double> StepCosts::IdleDraftMs(int64_t batch) const {
  const Bucket* bucket = Find(batch);
  if (bucket == nullptr || bucket->idle_draft.samples == 0) return std::nullopt;
  return bucket->idle_draft.value;
}

std::optional<int64_t> StepCosts::SingleAge(int64_t batch) const {
  const Bucket* bucket = Find(batch);
  if (bucket == nullptr || !bucket->single_at_step.has_value()) return std::nullopt;
  return bucket->steps - *bucket->single_at_step;
}

std::optional<int64_t> StepCosts::DraftAge(int64_t batch) const {
  const Bucket* bucket = Find(batch);
  if (bucket == nullptr || !bucket->drafted_at_step.has_value()) return std::nullopt;
  return bucket->steps - *bucket->drafted_at_step;
}

}  // namespace specd::engine
