#pragma once
// The trainer's Prometheus metrics: jobs per state, each running job's step, loss and
// throughput, and jobs finished per terminal state.
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <map>
#include <string>

#include "specd/v1/trainer.pb.h"

namespace specd::trainer {

class TrainerMetrics {
 public:
  // Registers the families (idempotent: a second TrainerMetrics on one registry shares them).
  explicit TrainerMetrics(prometheus::Registry& registry);

  // specd_trainer_jobs{state}: every state, 0 where `counts` has none.
  void SetJobCounts(const std::map<v1::JobState, int64_t>& counts);
  // specd_trainer_job_step, _loss and _tokens_per_second{job_id, type}.
  void SetProgress(const std::string& job_id, v1::JobType type, const v1::JobProgress& progress);
  // specd_trainer_jobs_finished_total{state}.
  void JobFinished(v1::JobState state);

 private:
  prometheus::Family<prometheus::Gauge>& jobs_;
  prometheus::Family<prometheus::Gauge>& step_;
  prometheus::Family<prometheus::Gauge>& loss_;
  prometheus::Family<prometheus::Gauge>& tokens_per_second_;
  prometheus::Family<prometheus::Counter>& finished_;
};

}  // namespace specd::trainer
