#include "services/trainer/service/trainer_metrics.h"

#include "services/trainer/service/job_names.h"

namespace specd::trainer {

TrainerMetrics::TrainerMetrics(metrics::Registry& registry)
    : jobs_(registry.AddGauge("specd_trainer_jobs", "Training jobs in each state.", {"state"})),
      step_(registry.AddGauge("specd_trainer_job_step",
                              "Optimizer steps a job's current stage has completed.",
                              {"job_id", "type"})),
      loss_(registry.AddGauge("specd_trainer_job_loss", "A job's most recent training loss.",
                              {"job_id", "type"})),
      tokens_per_second_(registry.AddGauge(
          "specd_trainer_job_tokens_per_second",
          "A job's training throughput over its last logging interval, in tokens per second.",
          {"job_id", "type"})),
      finished_(registry.AddCounter("specd_trainer_jobs_finished_total",
                                    "Training jobs that reached a terminal state.", {"state"})) {
  for (const v1::JobState state :
       {v1::JOB_STATE_SUCCEEDED, v1::JOB_STATE_FAILED, v1::JOB_STATE_CANCELLED}) {
    finished_.WithLabels({JobStateName(state)});  // present at 0 before the first
  }
}

void TrainerMetrics::SetJobCounts(const std::map<v1::JobState, int64_t>& counts) {
  for (int value = v1::JobState_MIN; value <= v1::JobState_MAX; ++value) {
    const auto state = static_cast<v1::JobState>(value);
    if (state == v1::JOB_STATE_UNSPECIFIED || !v1::JobState_IsValid(value)) continue;
    const auto found = counts.find(state);
    jobs_.WithLabels({JobStateName(state)})
        .Set(found == counts.end() ? 0.0 : static_cast<double>(found->second));
  }
}

void TrainerMetrics::SetProgress(const std::string& job_id, v1::JobType type,
                                 const v1::JobProgress& progress) {
  const std::vector<std::string> labels = {job_id, JobTypeName(type)};
  step_.WithLabels(labels).Set(static_cast<double>(progress.step()));
  if (progress.has_loss()) loss_.WithLabels(labels).Set(progress.loss());
  tokens_per_second_.WithLabels(labels).Set(progress.tokens_per_second());
}

void TrainerMetrics::JobFinished(v1::JobState state) {
  finished_.WithLabels({JobStateName(state)}).Increment();
}

}  // namespace specd::trainer
