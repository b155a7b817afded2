#pragma once
// A running job's progress, read from what its process prints (the training loop's step,
// validation and resume lines; regeneration, GPTQ and quantization counters; the pipeline's
// "== pipeline: STEP" headers) and from the metrics.jsonl of the stage's run directory, which
// has the tokens of each step and so the throughput no printed line carries.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "specd/v1/trainer.pb.h"

namespace specd::trainer {

class ProgressTracker {
 public:
  // `run_dir`: the stage's run directory (JobPlan::run_dir); for a pipeline, its directory, whose
  // subdirectories are the training stages' runs. `initial`: the progress stored so far.
  ProgressTracker(v1::JobType type, std::filesystem::path run_dir, v1::JobProgress initial);

  // Takes one line of output; true if it changed the progress (then stamped `now`).
  bool OnLine(std::string_view line, absl::Time now);

  const v1::JobProgress& progress() const { return progress_; }

  // The newest resumable state directory of the job's runs (<run>/state holding a progress.json);
  // `previous` while none has appeared.
  std::string LastCheckpoint(const std::string& previous) const;

 private:
  // Switches to a pipeline step, by the name its header line prints.
  void EnterPipelineStep(std::string_view name);
  // Throughput of the newest step in <current run>/metrics.jsonl.
  void ReadThroughput();

  v1::JobType type_;
  std::filesystem::path run_dir_;      // the job's
  std::filesystem::path current_run_;  // the stage now running: run_dir_ or a subdirectory
  v1::JobProgress progress_;
  // Where reading metrics.jsonl stopped, and the step read last.
  uintmax_t metrics_offset_ = 0;
  std::optional<std::pair<int64_t, double>> last_metrics_step_;  // (step, seconds)
};

}  // namespace specd::trainer
