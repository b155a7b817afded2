#pragma once
// The trainer's jobs, persisted in one SQLite file (<work_root>/jobs.sqlite): every field of
// specd.v1.Job, the request each was created from (for idempotent SubmitJob), and the ListJobs
// page tokens this store issued. Thread-safe; one JobStore per file.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/trainer/service/sqlite_database.h"
#include "specd/v1/trainer.pb.h"

namespace specd::trainer {

// The request rules of SubmitJob that need no config: a submission_id of 1–128 characters from
// [A-Za-z0-9._-], a type, at most 64 labels. INVALID_ARGUMENT naming the rule otherwise.
absl::Status ValidateSubmitRequest(const v1::SubmitJobRequest& request);

class JobStore {
 public:
  static absl::StatusOr<std::unique_ptr<JobStore>> Open(const std::filesystem::path& file);

  struct CreateResult {
    v1::Job job;
    bool created = false;  // false: the submission_id already named this job
  };

  // The job created by an earlier request with this submission_id: nullopt if none,
  // ALREADY_EXISTS if that request differed in type, config_yaml, output_dir or labels.
  absl::StatusOr<std::optional<v1::Job>> FindSubmission(const v1::SubmitJobRequest& request);

  // Creates a QUEUED job from `request` (attempt 0, progress.stage = its type), or returns the
  // one an identical earlier request created, atomically, as FindSubmission decides.
  // `output_dir` is where the job writes (request.output_dir resolved, or the default).
  absl::StatusOr<CreateResult> Create(const v1::SubmitJobRequest& request,
                                      const std::string& job_id, const std::string& output_dir,
                                      absl::Time create_time);

  // NOT_FOUND for an unknown id.
  absl::StatusOr<v1::Job> Get(const std::string& job_id);

  // Newest first; see ListJobsRequest for filters, page sizes and tokens.
  absl::StatusOr<v1::ListJobsResponse> List(const v1::ListJobsRequest& request);

  // Reads the job, applies `change` and writes it back in one transaction; returns the new job.
  // The fields SubmitJob set (job_id, submission_id, type, config_yaml, output_dir, labels,
  // create_time) cannot change: FAILED_PRECONDITION if `change` alters one.
  absl::StatusOr<v1::Job> Update(const std::string& job_id,
                                 const std::function<void(v1::Job&)>& change);

  // Jobs in any of `states`, oldest first (submission order).
  absl::StatusOr<std::vector<v1::Job>> InStates(const std::vector<v1::JobState>& states);

  // How many jobs are in each state (states without jobs are absent).
  absl::StatusOr<std::map<v1::JobState, int64_t>> CountByState();

 private:
  explicit JobStore(std::unique_ptr<SqliteDatabase> db) : db_(std::move(db)) {}
  // With mutex_ held.
  absl::StatusOr<std::optional<v1::Job>> FindSubmissionLocked(const v1::SubmitJobRequest& request);
  absl::StatusOr<v1::Job> GetLocked(const std::string& job_id);
  // Records a token for the page of `filter` that starts below `after_seq`.
  absl::StatusOr<std::string> IssuePageToken(const std::string& filter, int64_t after_seq);

  std::mutex mutex_;
  std::unique_ptr<SqliteDatabase> db_;
};

}  // namespace specd::trainer
