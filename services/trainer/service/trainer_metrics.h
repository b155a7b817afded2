#pragma once
// The trainer's Prometheus metrics: jobs per state, each running job's step, loss and
// throughput, and jobs finished per terminal state.
#include <map>
#include <string>

#include "common/metrics/registry.h"
#include "specd/v1/trainer.pb.h"

namespace specd::trainer {

class TrainerMetrics {
 public:
  // Registers the families (idempotent: a second TrainerMetrics on one registry shares them).
  explicit TrainerMetrics(metrics::Registry& registry);

  // specd_trainer_jobs{state}: every state, 0 where `counts` has none.
  void SetJobCounts(const std::map<v1::JobState, int64_t>& counts);
  // specd_trainer_job_step, _loss and _tokens_per_second{job_id, type}.
  void SetProgress(const std::string& job_id, v1::JobType type, const v1::JobProgress& progress);
  // specd_trainer_jobs_finished_total{state}.
  void JobFinished(v1::JobState state);

 private:
  metrics::Family<metrics::Gauge>& jobs_;
  metrics::Family<metrics::Gauge>& step_;
  metrics::Family<metrics::Gauge>& loss_;
  metrics::Family<metrics::Gauge>& tokens_per_second_;
  metrics::Family<metrics::Counter>& finished_;
};

}  // namespace specd::trainer
