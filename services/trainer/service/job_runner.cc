#include "services/trainer/service/job_runner.h"

#include <fcntl.h>
#include <google/protobuf/util/time_util.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/io/atomic_file.h"
#include "common/rpc/random_id.h"
#include "services/trainer/service/config_check.h"
#include "services/trainer/service/job_names.h"
#include "services/trainer/service/job_plan.h"

namespace specd::trainer {
namespace {

using google::protobuf::util::TimeUtil;

// How often a running job's progress is written to the store, at most.
constexpr absl::Duration kProgressSaveInterval = absl::Seconds(1);
// How long the supervisor sleeps when no child writes and nothing wakes it.
constexpr absl::Duration kPollInterval = absl::Milliseconds(200);

google::protobuf::Timestamp ToTimestamp(absl::Time time) {
  return TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(time));
}

std::filesystem::path OutputDirFor(const std::filesystem::path& work_root,
                                   const std::string& requested, const std::string& job_id) {
  if (requested.empty()) return work_root / "jobs" / job_id;
  // Relative directories are the trainer's, not the client's: under the work root.
  return (work_root / requested).lexically_normal();
}

std::string FailureReason(int exit_code, const std::string& last_line) {
  if (exit_code < 0) return absl::StrCat("killed by signal ", -exit_code);
  std::string reason = absl::StrCat("exit status ", exit_code);
  if (!last_line.empty()) absl::StrAppend(&reason, ": ", last_line);
  return reason;
}

std::string DescribeExit(int exit_code) {
  return exit_code < 0 ? absl::StrCat("killed by signal ", -exit_code)
                       : absl::StrCat("exit status ", exit_code);
}

// Appends one trainer line to the log of a job that has no running process.
void AppendToLog(const v1::Job& job, const std::string& text) {
  absl::StatusOr<JobLogWriter> log =
      JobLogWriter::Open(std::filesystem::path(job.output_dir()) / "job.log");
  if (log.ok()) log->AppendTrainerLine(text);
}

}  // namespace

absl::StatusOr<std::unique_ptr<JobRunner>> JobRunner::Create(JobRunnerOptions options,
                                                             JobStore& store,
                                                             TrainerMetrics& metrics) {
  if (options.max_running_jobs < 1) {
    return absl::InvalidArgumentError("max_running_jobs must be at least 1");
  }
  std::error_code error;
  options.work_root = std::filesystem::absolute(options.work_root, error);
  std::filesystem::create_directories(options.work_root, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot create the work root ",
                                            options.work_root.string(), ": ", error.message()));
  }
  std::vector<std::filesystem::path> roots = {options.work_root};
  roots.insert(roots.end(), options.allowed_roots.begin(), options.allowed_roots.end());
  absl::StatusOr<io::AllowedRoots> allowed_roots = io::AllowedRoots::Create(roots);
  if (!allowed_roots.ok()) return allowed_roots.status();
  // Two runners on one work root would both resume the same jobs.
  const std::filesystem::path lock_path = options.work_root / "trainer.lock";
  const int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot open ", lock_path.string(), ": ", std::strerror(errno)));
  }
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    close(lock_fd);
    return absl::FailedPreconditionError(
        absl::StrCat("another trainer is running on ", options.work_root.string()));
  }
  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    close(lock_fd);
    return absl::ResourceExhaustedError(absl::StrCat("pipe: ", std::strerror(errno)));
  }

  // A CANCELLING job's process died with the previous trainer: the cancellation is complete.
  absl::StatusOr<std::vector<v1::Job>> cancelling = store.InStates({v1::JOB_STATE_CANCELLING});
  if (!cancelling.ok()) return cancelling.status();
  for (const v1::Job& job : *cancelling) {
    absl::StatusOr<v1::Job> cancelled = store.Update(job.job_id(), [](v1::Job& job) {
      job.set_state(v1::JOB_STATE_CANCELLED);
      *job.mutable_end_time() = ToTimestamp(absl::Now());
    });
    if (!cancelled.ok()) return cancelled.status();
    AppendToLog(job, "cancelled: the trainer restarted while the job was being cancelled");
    metrics.JobFinished(v1::JOB_STATE_CANCELLED);
  }

  std::unique_ptr<JobRunner> runner(new JobRunner(std::move(options), *std::move(allowed_roots),
                                                  store, metrics, lock_fd, wake[0], wake[1]));
  runner->RefreshCounts();
  runner->supervisor_ = std::thread([runner = runner.get()] { runner->Supervise(); });
  std::unique_lock lock(runner->mutex_);
  runner->started_.wait(lock, [&] { return runner->resumed_; });
  return runner;
}

JobRunner::JobRunner(JobRunnerOptions options, io::AllowedRoots allowed_roots, JobStore& store,
                     TrainerMetrics& metrics, int lock_fd, int wake_read_fd, int wake_write_fd)
    : options_(std::move(options)),
      allowed_roots_(std::move(allowed_roots)),
      store_(store),
      metrics_(metrics),
      lock_fd_(lock_fd),
      wake_read_fd_(wake_read_fd),
      wake_write_fd_(wake_write_fd) {}

JobRunner::~JobRunner() {
  Shutdown();
  close(wake_read_fd_);
  close(wake_write_fd_);
  close(lock_fd_);  // releases the lock
}

void JobRunner::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    Wake();
    if (supervisor_.joinable()) supervisor_.join();
  });
}

void JobRunner::Wake() {
  const char byte = 1;
  const ssize_t written = write(wake_write_fd_, &byte, 1);
  (void)written;  // a full pipe already wakes the supervisor
}

void JobRunner::Report(const absl::Status& status, const std::string& what) {
  if (!status.ok()) std::cerr << "specd trainer: " << what << ": " << status << "\n";
}

void JobRunner::RefreshCounts() {
  absl::StatusOr<std::map<v1::JobState, int64_t>> counts = store_.CountByState();
  if (counts.ok()) {
    metrics_.SetJobCounts(*counts);
  } else {
    Report(counts.status(), "counting jobs");
  }
}

absl::StatusOr<v1::SubmitJobResponse> JobRunner::Submit(const v1::SubmitJobRequest& request) {
  if (absl::Status status = ValidateSubmitRequest(request); !status.ok()) return status;
  v1::SubmitJobResponse response;
  // A retry is answered from the store, without checking its config again.
  absl::StatusOr<std::optional<v1::Job>> existing = store_.FindSubmission(request);
  if (!existing.ok()) return existing.status();
  if (existing->has_value()) {
    *response.mutable_job() = **existing;
    response.set_created(false);
    return response;
  }
  const std::string job_id = absl::StrCat("job-", rpc::RandomHex(6));
  const std::filesystem::path output_dir =
      OutputDirFor(options_.work_root, request.output_dir(), job_id);
  if (absl::Status status = allowed_roots_.Check(output_dir, "output_dir"); !status.ok()) {
    return status;
  }
  absl::StatusOr<JobPlan> plan =
      PlanJob(request.type(), request.config_yaml(), output_dir, allowed_roots_.roots());
  if (!plan.ok()) return plan.status();
  if (absl::Status status = CheckJobConfig(
          options_.specd_binary, *plan, options_.work_root / "tmp" / absl::StrCat(job_id, ".yaml"),
          options_.config_check_timeout);
      !status.ok()) {
    return status;
  }
  absl::StatusOr<JobStore::CreateResult> created =
      store_.Create(request, job_id, output_dir.string(), absl::Now());
  if (!created.ok()) return created.status();
  if (created->created) {
    std::lock_guard lock(mutex_);
    check_queue_ = true;
    RefreshCounts();
    Wake();
  }
  *response.mutable_job() = std::move(created->job);
  response.set_created(created->created);
  return response;
}

absl::StatusOr<v1::Job> JobRunner::Cancel(const std::string& job_id, const std::string& reason) {
  std::lock_guard lock(mutex_);
  absl::StatusOr<v1::Job> job = store_.Get(job_id);
  if (!job.ok()) return job.status();
  const std::string because = reason.empty() ? "" : absl::StrCat(" (", reason, ")");
  switch (job->state()) {
    case v1::JOB_STATE_QUEUED: {
      absl::StatusOr<v1::Job> cancelled = store_.Update(job_id, [](v1::Job& job) {
        job.set_state(v1::JOB_STATE_CANCELLED);
        *job.mutable_end_time() = ToTimestamp(absl::Now());
      });
      if (!cancelled.ok()) return cancelled.status();
      AppendToLog(*cancelled, absl::StrCat("cancelled before it started", because));
      metrics_.JobFinished(v1::JOB_STATE_CANCELLED);
      RefreshCounts();
      return cancelled;
    }
    case v1::JOB_STATE_RUNNING: {
      const auto found = running_.find(job_id);
      if (found == running_.end()) {  // stopped with the trainer, to resume at its next start
        return absl::UnavailableError(
            "the trainer is shutting down; cancel the job after it restarts");
      }
      RunningJob& running = found->second;
      absl::StatusOr<v1::Job> cancelling =
          store_.Update(job_id, [](v1::Job& job) { job.set_state(v1::JOB_STATE_CANCELLING); });
      if (!cancelling.ok()) return cancelling.status();
      running.log.AppendTrainerLine(absl::StrCat("cancel requested", because,
                                                 ": SIGTERM, SIGKILL after ",
                                                 absl::FormatDuration(options_.cancel_grace)));
      running.cancelling = true;
      running.child.Signal(SIGTERM);
      running.kill_at = absl::Now() + options_.cancel_grace;
      RefreshCounts();
      Wake();
      return cancelling;
    }
    case v1::JOB_STATE_CANCELLING:
    case v1::JOB_STATE_CANCELLED:
      return job;
    default:
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", job_id, " has already ", JobStateName(job->state()), "; it cannot be cancelled"));
  }
}

void JobRunner::Supervise() {
  std::unique_lock lock(mutex_);
  // The jobs the previous trainer was running continue first, whatever the limit: they had
  // their slots.
  absl::StatusOr<std::vector<v1::Job>> resumed = store_.InStates({v1::JOB_STATE_RUNNING});
  Report(resumed.status(), "finding the jobs to resume");
  if (resumed.ok()) {
    for (const v1::Job& job : *resumed) StartJob(job);
  }
  resumed_ = true;
  started_.notify_all();

  while (!stopping_) {
    StartQueuedJobs();
    PollOutputs(lock, kPollInterval);
    const absl::Time now = absl::Now();
    for (auto& [id, job] : running_) ReadOutput(job, now);
    ReapExited(now);
    KillOverdue(now);
    for (auto& [id, job] : running_) SaveProgress(job, now);
  }
  StopAll(lock);
}

void JobRunner::PollOutputs(std::unique_lock<std::mutex>& lock, absl::Duration timeout) {
  std::vector<pollfd> fds = {{.fd = wake_read_fd_, .events = POLLIN, .revents = 0}};
  for (const auto& [id, job] : running_) {
    if (!job.output_closed)
      fds.push_back({.fd = job.child.output_fd(), .events = POLLIN, .revents = 0});
  }
  // Only this thread closes the descriptors, so polling them without the lock is safe.
  lock.unlock();
  poll(fds.data(), fds.size(), static_cast<int>(absl::ToInt64Milliseconds(timeout)));
  char drain[64];
  while (read(wake_read_fd_, drain, sizeof(drain)) > 0) {
  }
  lock.lock();
}

void JobRunner::StartQueuedJobs() {
  if (!check_queue_ || static_cast<int>(running_.size()) >= options_.max_running_jobs) return;
  check_queue_ = false;
  absl::StatusOr<std::vector<v1::Job>> queued = store_.InStates({v1::JOB_STATE_QUEUED});
  if (!queued.ok()) {
    Report(queued.status(), "reading the queue");
    check_queue_ = true;
    return;
  }
  for (const v1::Job& job : *queued) {
    if (static_cast<int>(running_.size()) >= options_.max_running_jobs) break;
    StartJob(job);
  }
}

void JobRunner::StartJob(const v1::Job& job) {
  const absl::Time now = absl::Now();
  const uint32_t attempt = job.attempt() + 1;
  const auto fail = [&](const std::string& reason) {
    AppendToLog(job, absl::StrCat("attempt ", attempt, " could not start: ", reason));
    Report(store_
               .Update(job.job_id(),
                       [&](v1::Job& job) {
                         job.set_state(v1::JOB_STATE_FAILED);
                         job.set_attempt(attempt);
                         job.set_failure_reason(reason);
                         *job.mutable_end_time() = ToTimestamp(now);
                       })
               .status(),
           "failing a job that could not start");
    metrics_.JobFinished(v1::JOB_STATE_FAILED);
    RefreshCounts();
    check_queue_ = true;
  };
  const std::filesystem::path output_dir(job.output_dir());
  absl::StatusOr<JobPlan> plan =
      PlanJob(job.type(), job.config_yaml(), output_dir, allowed_roots_.roots());
  if (!plan.ok()) return fail(std::string(plan.status().message()));
  absl::StatusOr<JobLogWriter> log = JobLogWriter::Open(output_dir / "job.log");
  if (!log.ok()) return fail(std::string(log.status().message()));
  // Written at every start, so that a resumed stage reads what was submitted.
  if (absl::Status status = io::WriteFileAtomically(plan->config_file(), plan->config_yaml);
      !status.ok()) {
    return fail(std::string(status.message()));
  }
  std::vector<std::string> argv = {options_.specd_binary.string()};
  for (std::string& argument : plan->Arguments(plan->config_file(), /*dry_run=*/false)) {
    argv.push_back(std::move(argument));
  }
  log->AppendTrainerLine(absl::StrCat(
      "attempt ", attempt, " of job ", job.job_id(), " (", JobTypeName(job.type()), ") started at ",
      absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", now, absl::UTCTimeZone()), ": ",
      absl::StrJoin(argv, " ")));
  absl::StatusOr<ChildProcess> child = ChildProcess::Spawn(argv, /*die_with_parent=*/true);
  if (!child.ok()) return fail(std::string(child.status().message()));
  absl::StatusOr<v1::Job> running = store_.Update(job.job_id(), [&](v1::Job& job) {
    job.set_state(v1::JOB_STATE_RUNNING);
    job.set_attempt(attempt);
    if (!job.has_start_time()) *job.mutable_start_time() = ToTimestamp(now);
  });
  Report(running.status(), "marking a job running");
  running_.emplace(job.job_id(),
                   RunningJob{.job_id = job.job_id(),
                              .type = job.type(),
                              .attempt = attempt,
                              .child = *std::move(child),
                              .log = *std::move(log),
                              .tracker = ProgressTracker(job.type(), plan->run_dir, job.progress()),
                              .last_checkpoint = job.last_checkpoint(),
                              .output_closed = false,
                              .progress_changed = false,
                              .progress_saved = now,
                              .cancelling = false,
                              .kill_at = std::nullopt});
  RefreshCounts();
}

void JobRunner::ReadOutput(RunningJob& job, absl::Time now) {
  if (job.output_closed) return;
  const std::string data = job.child.ReadAvailable(&job.output_closed);
  for (const std::string& line : job.log.AppendOutput(data)) {
    if (job.tracker.OnLine(line, now)) job.progress_changed = true;
  }
  if (job.progress_changed) {
    metrics_.SetProgress(job.job_id, job.type, job.tracker.progress());
  }
}

void JobRunner::ReapExited(absl::Time now) {
  for (auto it = running_.begin(); it != running_.end();) {
    RunningJob& job = it->second;
    const std::optional<int> status = job.child.TryReap();
    if (!status.has_value()) {
      ++it;
      continue;
    }
    // The pipe holds whatever the process wrote last; nothing else writes to it now.
    for (const std::string& line : job.log.AppendOutput(job.child.ReadAvailable())) {
      job.tracker.OnLine(line, now);
    }
    for (const std::string& line : job.log.FlushOutput()) job.tracker.OnLine(line, now);
    Finish(job, ExitCodeOf(*status), now);
    it = running_.erase(it);
    check_queue_ = true;
  }
}

void JobRunner::Finish(RunningJob& job, int exit_code, absl::Time now) {
  v1::JobState state;
  std::string reason;
  if (job.cancelling) {
    state = v1::JOB_STATE_CANCELLED;
  } else if (exit_code == 0) {
    state = v1::JOB_STATE_SUCCEEDED;
  } else if (stopping_) {
    // Stopped with the trainer: the job stays RUNNING and resumes at the next start.
    job.log.AppendTrainerLine(absl::StrCat("attempt ", job.attempt, " stopped with the trainer (",
                                           DescribeExit(exit_code),
                                           "); the job resumes when the trainer restarts"));
    SaveProgress(job, now, /*force=*/true);
    return;
  } else {
    state = v1::JOB_STATE_FAILED;
    reason = FailureReason(exit_code, job.log.last_output_line());
  }
  job.log.AppendTrainerLine(absl::StrCat("attempt ", job.attempt, " ended (",
                                         DescribeExit(exit_code), "): ", JobStateName(state)));
  const v1::JobProgress progress = job.tracker.progress();
  const std::string checkpoint = job.tracker.LastCheckpoint(job.last_checkpoint);
  absl::StatusOr<v1::Job> finished = store_.Update(job.job_id, [&](v1::Job& stored) {
    stored.set_state(state);
    stored.set_exit_code(exit_code);
    stored.set_failure_reason(reason);
    *stored.mutable_end_time() = ToTimestamp(now);
    *stored.mutable_progress() = progress;
    stored.set_last_checkpoint(checkpoint);
  });
  Report(finished.status(), "recording a finished job");
  metrics_.SetProgress(job.job_id, job.type, progress);
  metrics_.JobFinished(state);
  RefreshCounts();
}

void JobRunner::SaveProgress(RunningJob& job, absl::Time now, bool force) {
  if (!force && now - job.progress_saved < kProgressSaveInterval) return;
  const std::string checkpoint = job.tracker.LastCheckpoint(job.last_checkpoint);
  if (!force && !job.progress_changed && checkpoint == job.last_checkpoint) return;
  const v1::JobProgress progress = job.tracker.progress();
  absl::StatusOr<v1::Job> saved = store_.Update(job.job_id, [&](v1::Job& stored) {
    *stored.mutable_progress() = progress;
    stored.set_last_checkpoint(checkpoint);
  });
  Report(saved.status(), "saving a job's progress");
  job.last_checkpoint = checkpoint;
  job.progress_changed = false;
  job.progress_saved = now;
}

void JobRunner::KillOverdue(absl::Time now) {
  for (auto& [id, job] : running_) {
    if (job.kill_at.has_value() && now >= *job.kill_at) {
      job.log.AppendTrainerLine("still running after the grace period: SIGKILL");
      job.child.Signal(SIGKILL);
      job.kill_at.reset();
    }
  }
}

void JobRunner::StopAll(std::unique_lock<std::mutex>& lock) {
  const absl::Time now = absl::Now();
  for (auto& [id, job] : running_) {
    if (!job.cancelling) {
      job.log.AppendTrainerLine("the trainer is stopping: SIGTERM");
      job.child.Signal(SIGTERM);
      job.kill_at = now + options_.cancel_grace;
    }
  }
  while (!running_.empty()) {
    PollOutputs(lock, absl::Milliseconds(50));
    const absl::Time time = absl::Now();
    for (auto& [id, job] : running_) ReadOutput(job, time);
    ReapExited(time);
    KillOverdue(time);
  }
}

}  // namespace specd::trainer
