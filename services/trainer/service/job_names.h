#pragma once
// Short names of job types and states ("drafter-stage1", "running") for the command line, metric
// labels and log lines, derived from the proto enum names so that they never drift from them.
#include <optional>
#include <string>
#include <string_view>

#include "specd/v1/trainer.pb.h"

namespace specd::trainer {

// "pretrain", "drafter-stage1", "gptq-drafter"; "unspecified" for JOB_TYPE_UNSPECIFIED.
std::string JobTypeName(v1::JobType type);
// "queued", "running", "cancelling".
std::string JobStateName(v1::JobState state);

// The inverse of the names above; nullopt for anything else (including "unspecified").
std::optional<v1::JobType> ParseJobTypeName(std::string_view name);
std::optional<v1::JobState> ParseJobStateName(std::string_view name);

// SUCCEEDED, FAILED and CANCELLED: a job never leaves them.
bool IsTerminal(v1::JobState state);

}  // namespace specd::trainer
