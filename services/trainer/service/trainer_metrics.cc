#include "services/trainer/service/trainer_metrics.h"

#include <prometheus/labels.h>

#include "services/trainer/service/job_names.h"

namespace specd::trainer {

TrainerMetrics::TrainerMetrics(prometheus::Registry& registry)
    : jobs_(prometheus::BuildGauge()
                .Name("specd_trainer_jobs")
                .Help("Training jobs in each state.")
                .Register(registry)),
      step_(prometheus::BuildGauge()
                .Name("specd_trainer_job_step")
                .Help("Optimizer steps a job's current stage has completed.")
                .Register(registry)),
      loss_(prometheus::BuildGauge()
                .Name("specd_trainer_job_loss")
                .Help("A job's most recent training loss.")
                .Register(registry)),
      tokens_per_second_(prometheus::BuildGauge()
                             .Name("specd_trainer_job_tokens_per_second")
                             .Help("A job's training throughput over its last logging interval, "
                                   "in tokens per second.")
                             .Register(registry)),
      finished_(prometheus::BuildCounter()
                    .Name("specd_trainer_jobs_finished_total")
                    .Help("Training jobs that reached a terminal state.")
                    .Register(registry)) {
  for (const v1::JobState state :
       {v1::JOB_STATE_SUCCEEDED, v1::JOB_STATE_FAILED, v1::JOB_STATE_CANCELLED}) {
    finished_.Add({{"state", JobStateName(state)}});  // present at 0 before the first
  }
}

void TrainerMetrics::SetJobCounts(const std::map<v1::JobState, int64_t>& counts) {
  for (int value = v1::JobState_MIN; value <= v1::JobState_MAX; ++value) {
    const auto state = static_cast<v1::JobState>(value);
    if (state == v1::JOB_STATE_UNSPECIFIED || !v1::JobState_IsValid(value)) continue;
    const auto found = counts.find(state);
    jobs_.Add({{"state", JobStateName(state)}})
        .Set(found == counts.end() ? 0.0 : static_cast<double>(found->second));
  }
}

void TrainerMetrics::SetProgress(const std::string& job_id, v1::JobType type,
                                 const v1::JobProgress& progress) {
  const prometheus::Labels labels = {{"job_id", job_id}, {"type", JobTypeName(type)}};
  step_.Add(labels).Set(static_cast<double>(progress.step()));
  if (progress.has_loss()) loss_.Add(labels).Set(progress.loss());
  tokens_per_second_.Add(labels).Set(progress.tokens_per_second());
}

void TrainerMetrics::JobFinished(v1::JobState state) {
  finished_.Add({{"state", JobStateName(state)}}).Increment();
}

}  // namespace specd::trainer
