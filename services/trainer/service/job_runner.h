#pragma once
// Runs the trainer's jobs as child processes of the `specd` binary: at most max_running_jobs at
// a time, the others QUEUED in submission order; each child's output goes to its job.log and
// its progress lines into the job. Cancellation is SIGTERM, then SIGKILL after a grace period.
// A new JobRunner on a work root resumes what the previous one left RUNNING (attempt + 1; the
// stage continues from its checkpoint) and ends what it left CANCELLING.
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/io/allowed_roots.h"
#include "services/trainer/service/child_process.h"
#include "services/trainer/service/job_log.h"
#include "services/trainer/service/job_store.h"
#include "services/trainer/service/progress_tracker.h"
#include "services/trainer/service/trainer_metrics.h"
#include "specd/v1/trainer.pb.h"

namespace specd::trainer {

struct JobRunnerOptions {
  std::filesystem::path work_root;  // jobs/<job_id>/ default output directories, the lock
  // Besides work_root, what a job's output directory and every path in its config may lie under.
  std::vector<std::filesystem::path> allowed_roots;
  std::filesystem::path specd_binary;  // the program every job runs
  int max_running_jobs = 1;
  absl::Duration cancel_grace = absl::Seconds(10);  // SIGTERM → SIGKILL
  absl::Duration config_check_timeout = absl::Seconds(60);
};

class JobRunner {
 public:
  // Takes <work_root>/trainer.lock (FAILED_PRECONDITION while another runner holds it), recovers
  // the jobs a previous runner left, and starts them and the queue.
  static absl::StatusOr<std::unique_ptr<JobRunner>> Create(JobRunnerOptions options,
                                                           JobStore& store,
                                                           TrainerMetrics& metrics);
  ~JobRunner();
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // SubmitJob: validates the request, its output directory against the allowed roots, and the
  // config (specd --dry-run, its paths against the same roots), then creates the job or returns
  // the one the same submission_id created. A path outside the roots is PERMISSION_DENIED, and
  // nothing is written.
  absl::StatusOr<v1::SubmitJobResponse> Submit(const v1::SubmitJobRequest& request);

  // CancelJob, as trainer.proto describes it; `reason` goes into the job's log.
  absl::StatusOr<v1::Job> Cancel(const std::string& job_id, const std::string& reason);

  // Stops every child (SIGTERM, SIGKILL after the grace period) and the supervisor. Jobs stay
  // RUNNING in the store, so the next runner resumes them; QUEUED ones stay queued. Idempotent.
  void Shutdown();

 private:
  struct RunningJob {
    std::string job_id;
    v1::JobType type;
    uint32_t attempt;
    ChildProcess child;
    JobLogWriter log;
    ProgressTracker tracker;
    std::string last_checkpoint;
    bool output_closed = false;
    bool progress_changed = false;
    absl::Time progress_saved;
    bool cancelling = false;
    std::optional<absl::Time> kill_at;  // SIGKILL then, unless it exited
  };

  JobRunner(JobRunnerOptions options, io::AllowedRoots allowed_roots, JobStore& store,
            TrainerMetrics& metrics, int lock_fd, int wake_read_fd, int wake_write_fd);

  // The supervisor thread: every child is forked from it, so that PR_SET_PDEATHSIG ties the
  // children to it (the signal follows the forking thread, not the process).
  void Supervise();
  // With mutex_ held, on the supervisor thread.
  void StartJob(const v1::Job& job);
  void StartQueuedJobs();
  void ReadOutput(RunningJob& job, absl::Time now);
  void ReapExited(absl::Time now);
  void Finish(RunningJob& job, int exit_code, absl::Time now);
  // Writes the progress and checkpoint to the store: at most once a second unless `force`d.
  void SaveProgress(RunningJob& job, absl::Time now, bool force = false);
  void KillOverdue(absl::Time now);
  void StopAll(std::unique_lock<std::mutex>& lock);
  void PollOutputs(std::unique_lock<std::mutex>& lock, absl::Duration timeout);

  void Wake();
  void RefreshCounts();
  // Records a failure the trainer cannot return to anyone (a store write in the supervisor).
  static void Report(const absl::Status& status, const std::string& what);

  const JobRunnerOptions options_;
  const io::AllowedRoots allowed_roots_;  // work_root and options_.allowed_roots, resolved
  JobStore& store_;
  TrainerMetrics& metrics_;
  const int lock_fd_;
  const int wake_read_fd_;
  const int wake_write_fd_;

  std::mutex mutex_;
  std::condition_variable started_;  // the supervisor has restarted the resumed jobs
  bool resumed_ = false;
  bool stopping_ = false;
  bool check_queue_ = true;
  std::map<std::string, RunningJob> running_;
  std::thread supervisor_;
  std::once_flag shutdown_once_;
};

}  // namespace specd::trainer
