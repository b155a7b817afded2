#include "common/engine/step_costs.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace specd::engine {
namespace {

// The planes' samples fade by this factor per step: about the last 64 steps count.
constexpr double kPlaneFading = 1 - 1.0 / 64;

// Each of a batch's requests records the step: one sample is a `batch`-th of it.
double StepsPerSample(int64_t batch) {
  return 1 / static_cast<double>(std::max<int64_t>(batch, 1));
}

double FadingPerSample(int64_t batch) { return std::pow(kPlaneFading, StepsPerSample(batch)); }

}  // namespace

void StepCosts::Plane::Add(double sample_x, double sample_y, double sample_ms, double fading) {
  for (double* sum : {&weight, &x, &y, &ms, &xx, &yy, &xy, &x_ms, &y_ms}) *sum *= fading;
  weight += 1;
  x += sample_x;
  y += sample_y;
  ms += sample_ms;
  xx += sample_x * sample_x;
  yy += sample_y * sample_y;
  xy += sample_x * sample_y;
  x_ms += sample_x * sample_ms;
  y_ms += sample_y * sample_ms;
}

double StepCosts::Plane::At(double at_x, double at_y) const {
  const double mean_x = x / weight, mean_y = y / weight, mean_ms = ms / weight;
  const double spread_x = xx / weight - mean_x * mean_x;
  const double spread_y = yy / weight - mean_y * mean_y;
  const double spread_xy = xy / weight - mean_x * mean_y;
  const double x_ms_spread = x_ms / weight - mean_x * mean_ms;
  const double y_ms_spread = y_ms / weight - mean_y * mean_ms;
  // One input's slope alone: none while it never varied.
  const auto alone = [](double spread, double with_ms) {
    return spread < 1 ? 0.0 : std::max(0.0, with_ms / spread);
  };
  double slope_x = alone(spread_x, x_ms_spread);
  double slope_y = alone(spread_y, y_ms_spread);
  if (spread_x >= 1 && spread_y >= 1) {
    // Both varied: the normal equations, with a small ridge so that samples whose inputs varied
    // only together (on one line) share the slope the smallest change explains.
    const double ridge = 1e-6 * (spread_x + spread_y);
    const double det = (spread_x + ridge) * (spread_y + ridge) - spread_xy * spread_xy;
    const double both_x = ((spread_y + ridge) * x_ms_spread - spread_xy * y_ms_spread) / det;
    const double both_y = ((spread_x + ridge) * y_ms_spread - spread_xy * x_ms_spread) / det;
    // A negative slope is dropped, and the other input's taken alone.
    if (both_x >= 0 && both_y >= 0) {
      slope_x = both_x;
      slope_y = both_y;
    } else if (both_x < 0) {
      slope_x = 0;
    } else {
      slope_y = 0;
    }
  }
  return std::max(0.0, mean_ms + slope_x * (at_x - mean_x) + slope_y * (at_y - mean_y));
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

void StepCosts::RecordVerify(int64_t batch, int64_t own, const TargetForward& forward, double ms) {
  Bucket& bucket = At(batch);
  bucket.steps += StepsPerSample(batch);
  const int64_t rows = forward.rows > 0 ? std::max(forward.rows, own) : own * batch;
  const int64_t sequences = forward.sequences > 0 ? forward.sequences : batch;
  const int64_t logit_rows = forward.logit_rows > 0 ? std::min(forward.logit_rows, rows) : rows;
  bucket.verify.Add(static_cast<double>(rows), static_cast<double>(logit_rows), ms,
                    FadingPerSample(batch));
  if (rows == sequences && forward.replayed_rows == 0) {
    bucket.target_only.Add(0, 0, ms, FadingPerSample(batch));
    bucket.target_only_at_step = bucket.steps;
  }
}

void StepCosts::RecordDraft(int64_t batch, int64_t own_drafts, int64_t forward_rows,
                            int64_t forward_drafts, double ms) {
  Bucket& bucket = At(batch);
  bucket.drafting.Add(static_cast<double>(forward_rows), static_cast<double>(forward_drafts), ms,
                      FadingPerSample(batch));
  if (bucket.own_drafts.has_value() && *bucket.own_drafts != own_drafts) {
    bucket.own_drafts_varied = true;
  }
  bucket.own_drafts = own_drafts;
  bucket.drafted_at_step = bucket.steps;
}

std::optional<double> StepCosts::VerifyMs(int64_t batch, double rows) const {
  const Bucket* bucket = Find(batch);
  if (bucket == nullptr || bucket->verify.weight == 0) return std::nullopt;
  return bucket->verify.At(rows, rows);
}

std::optional<double> StepCosts::TargetOnlyMs(int64_t batch) const {
  const Bucket* bucket = Find(batch);
  if (bucket == nullptr || bucket->target_only.weight == 0) {
    return VerifyMs(batch, static_cast<double>(batch));
  }
  return bucket->target_only.At(0, 0);
}

std::optional<double> StepCosts::DraftMs(int64_t batch, double rows, double drafts) const {
  const Bucket* bucket = Find(batch);
  if (bucket == nullptr || bucket->drafting.weight == 0) return std::nullopt;
  return bucket->drafting.At(rows, drafts);
}

std::optional<int64_t> StepCosts::OnlyDraftCount(int64_t batch) const {
  const Bucket* bucket = Find(batch);
  if (bucket == nullptr || bucket->own_drafts_varied) return std::nullopt;
  return bucket->own_drafts;
}

std::optional<int64_t> StepCosts::TargetOnlyAge(int64_t batch) const {
  const Bucket* bucket = Find(batch);
  if (bucket == nullptr || !bucket->target_only_at_step.has_value()) return std::nullopt;
  return static_cast<int64_t>(bucket->steps - *bucket->target_only_at_step);
}

std::optional<int64_t> StepCosts::DraftAge(int64_t batch) const {
  const Bucket* bucket = Find(batch);
  if (bucket == nullptr || !bucket->drafted_at_step.has_value()) return std::nullopt;
  return static_cast<int64_t>(bucket->steps - *bucket->drafted_at_step);
}

}  // namespace specd::engine
