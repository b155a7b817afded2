#pragma once
// How a job type runs as a `specd` command line: the YAML its output directory gets (the
// submitted text, plus the output key pointing into the directory when the text has none), the
// arguments that run it and the ones that only validate it, and where the stage keeps its
// resumable state.
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "specd/v1/trainer.pb.h"

namespace specd::trainer {

struct JobPlan {
  // The text of <output_dir>/config.yaml, which the stage reads (relative paths in it resolve
  // against output_dir).
  std::string config_yaml;
  // `specd train STAGE` for a stage; empty for a pipeline.
  std::string stage;
  // `specd pipeline --preset PRESET` for a pipeline.
  std::string preset;
  std::filesystem::path output_dir;
  // The stage's run directory (its `out`): metrics.jsonl and state/ live there. For a pipeline,
  // output_dir, whose subdirectories are the stages' runs.
  std::filesystem::path run_dir;
  // Every path the stage's config names must lie under one of these (`--allowed-root`).
  std::vector<std::filesystem::path> allowed_roots;

  std::filesystem::path config_file() const { return output_dir / "config.yaml"; }
  // specd's arguments (without the program) running the job from `config_file`, its relative
  // paths against output_dir wherever the file is; with `dry_run`, only checking the config.
  std::vector<std::string> Arguments(const std::filesystem::path& config_file, bool dry_run) const;
};

// INVALID_ARGUMENT ("config: ...") for YAML that is not a mapping, and for a pipeline config
// with a key other than `preset`. Keys of a stage, and its paths against `allowed_roots`, are
// checked by the stage (--dry-run).
absl::StatusOr<JobPlan> PlanJob(v1::JobType type, const std::string& config_yaml,
                                const std::filesystem::path& output_dir,
                                std::vector<std::filesystem::path> allowed_roots);

}  // namespace specd::trainer
