#pragma once
// Checks a job's config before the job is accepted, with the stage's own rules: runs
// `specd train STAGE --config FILE --dry-run` (or `specd pipeline ... --dry-run`) on it.
#include <filesystem>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "services/trainer/service/job_plan.h"

namespace specd::trainer {

// Writes `plan.config_yaml` to `scratch_file` (removed afterwards) and runs the dry run.
// INVALID_ARGUMENT with specd's message ("config: unknown keys: lr_sched") when it rejects the
// config; INTERNAL when the check itself could not run.
absl::Status CheckJobConfig(const std::filesystem::path& specd_binary, const JobPlan& plan,
                            const std::filesystem::path& scratch_file, absl::Duration timeout);

}  // namespace specd::trainer
