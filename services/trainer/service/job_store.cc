#include "services/trainer/service/job_store.h"

#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/rpc/random_id.h"
#include "nlohmann/json.hpp"

namespace specd::trainer {
namespace {

using google::protobuf::util::TimeUtil;

constexpr size_t kMaxSubmissionIdLength = 128;
constexpr int kMaxLabels = 64;
constexpr uint32_t kDefaultPageSize = 50;
constexpr uint32_t kMaxPageSize = 500;
// Page tokens are kept this long; a listing is paged through long before that.
constexpr absl::Duration kPageTokenLifetime = absl::Hours(24);

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS jobs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- submission order: ListJobs pages by it
  job_id TEXT NOT NULL UNIQUE,
  submission_id TEXT NOT NULL UNIQUE,
  type INTEGER NOT NULL,
  state INTEGER NOT NULL,
  config_yaml TEXT NOT NULL,
  output_dir TEXT NOT NULL,
  labels TEXT NOT NULL,                   -- a JSON object
  failure_reason TEXT NOT NULL,
  exit_code INTEGER,                      -- NULL until the process exited
  attempt INTEGER NOT NULL,
  last_checkpoint TEXT NOT NULL,
  create_time_ns INTEGER NOT NULL,
  start_time_ns INTEGER,
  end_time_ns INTEGER,
  progress_step INTEGER NOT NULL,
  progress_total_steps INTEGER NOT NULL,
  progress_loss REAL,
  progress_validation_loss REAL,
  progress_tokens_per_second REAL NOT NULL,
  progress_stage INTEGER NOT NULL,
  progress_update_time_ns INTEGER,
  progress_eta_ns INTEGER,
  requested_output_dir TEXT NOT NULL      -- SubmitJobRequest.output_dir, for idempotency
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (state);
CREATE TABLE IF NOT EXISTS page_tokens (
  token TEXT PRIMARY KEY,
  filter TEXT NOT NULL,        -- the ListJobs filters the token belongs to
  after_seq INTEGER NOT NULL,  -- the page starts below this seq
  issue_time_ns INTEGER NOT NULL
);
)sql";

constexpr char kColumns[] =
    "job_id, submission_id, type, state, config_yaml, output_dir, labels, failure_reason, "
    "exit_code, attempt, last_checkpoint, create_time_ns, start_time_ns, end_time_ns, "
    "progress_step, progress_total_steps, progress_loss, progress_validation_loss, "
    "progress_tokens_per_second, progress_stage, progress_update_time_ns, progress_eta_ns, "
    "requested_output_dir";
constexpr int kColumnCount = 23;

std::optional<int64_t> Nanos(bool present, const google::protobuf::Timestamp& time) {
  if (!present) return std::nullopt;
  return TimeUtil::TimestampToNanoseconds(time);
}

std::optional<int64_t> Nanos(bool present, const google::protobuf::Duration& duration) {
  if (!present) return std::nullopt;
  return TimeUtil::DurationToNanoseconds(duration);
}

std::string LabelsJson(const google::protobuf::Map<std::string, std::string>& labels) {
  nlohmann::json json = nlohmann::json::object();
  for (const auto& [key, value] : labels) json[key] = value;
  return json.dump();
}

// A job and the output_dir its request asked for, as one row holds them.
struct Row {
  v1::Job job;
  std::string requested_output_dir;
};

Row ReadRow(const SqliteStatement& row) {
  Row result;
  v1::Job& job = result.job;
  job.set_job_id(row.Text(0));
  job.set_submission_id(row.Text(1));
  job.set_type(static_cast<v1::JobType>(row.Int(2)));
  job.set_state(static_cast<v1::JobState>(row.Int(3)));
  job.set_config_yaml(row.Text(4));
  job.set_output_dir(row.Text(5));
  const nlohmann::json labels =
      nlohmann::json::parse(row.Text(6), nullptr, /*allow_exceptions=*/false);
  if (labels.is_object()) {
    for (const auto& [key, value] : labels.items()) {
      if (value.is_string()) (*job.mutable_labels())[key] = value.get<std::string>();
    }
  }
  job.set_failure_reason(row.Text(7));
  if (!row.IsNull(8)) job.set_exit_code(static_cast<int32_t>(row.Int(8)));
  job.set_attempt(static_cast<uint32_t>(row.Int(9)));
  job.set_last_checkpoint(row.Text(10));
  *job.mutable_create_time() = TimeUtil::NanosecondsToTimestamp(row.Int(11));
  if (!row.IsNull(12)) *job.mutable_start_time() = TimeUtil::NanosecondsToTimestamp(row.Int(12));
  if (!row.IsNull(13)) *job.mutable_end_time() = TimeUtil::NanosecondsToTimestamp(row.Int(13));
  v1::JobProgress& progress = *job.mutable_progress();
  progress.set_step(static_cast<uint64_t>(row.Int(14)));
  progress.set_total_steps(static_cast<uint64_t>(row.Int(15)));
  if (!row.IsNull(16)) progress.set_loss(row.Double(16));
  if (!row.IsNull(17)) progress.set_validation_loss(row.Double(17));
  progress.set_tokens_per_second(row.Double(18));
  progress.set_stage(static_cast<v1::JobType>(row.Int(19)));
  if (!row.IsNull(20)) {
    *progress.mutable_update_time() = TimeUtil::NanosecondsToTimestamp(row.Int(20));
  }
  if (!row.IsNull(21)) {
    *progress.mutable_estimated_time_remaining() = TimeUtil::NanosecondsToDuration(row.Int(21));
  }
  result.requested_output_dir = row.Text(22);
  return result;
}

// Binds the fields that change over a job's life, in the order of kMutableColumns, from
// `first`; returns the next free index.
constexpr char kMutableColumns[] =
    "state = ?, failure_reason = ?, exit_code = ?, attempt = ?, last_checkpoint = ?, "
    "start_time_ns = ?, end_time_ns = ?, progress_step = ?, progress_total_steps = ?, "
    "progress_loss = ?, progress_validation_loss = ?, progress_tokens_per_second = ?, "
    "progress_stage = ?, progress_update_time_ns = ?, progress_eta_ns = ?";

int BindMutable(SqliteStatement& statement, const v1::Job& job, int first) {
  int i = first;
  const v1::JobProgress& progress = job.progress();
  statement.Bind(i++, int64_t{job.state()});
  statement.Bind(i++, job.failure_reason());
  statement.Bind(i++, job.has_exit_code() ? std::optional<int64_t>(job.exit_code()) : std::nullopt);
  statement.Bind(i++, int64_t{job.attempt()});
  statement.Bind(i++, job.last_checkpoint());
  statement.Bind(i++, Nanos(job.has_start_time(), job.start_time()));
  statement.Bind(i++, Nanos(job.has_end_time(), job.end_time()));
  statement.Bind(i++, static_cast<int64_t>(progress.step()));
  statement.Bind(i++, static_cast<int64_t>(progress.total_steps()));
  statement.Bind(i++, progress.has_loss() ? std::optional<double>(progress.loss()) : std::nullopt);
  statement.Bind(i++, progress.has_validation_loss()
                          ? std::optional<double>(progress.validation_loss())
                          : std::nullopt);
  statement.Bind(i++, progress.tokens_per_second());
  statement.Bind(i++, int64_t{progress.stage()});
  statement.Bind(i++, Nanos(progress.has_update_time(), progress.update_time()));
  statement.Bind(
      i++, Nanos(progress.has_estimated_time_remaining(), progress.estimated_time_remaining()));
  return i;
}

bool SameLabels(const google::protobuf::Map<std::string, std::string>& a,
                const google::protobuf::Map<std::string, std::string>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [key, value] : a) {
    const auto found = b.find(key);
    if (found == b.end() || found->second != value) return false;
  }
  return true;
}

// The fields of `request` that differ from the one that created `row`.
std::vector<std::string> Differences(const v1::SubmitJobRequest& request, const Row& row) {
  std::vector<std::string> differences;
  if (request.type() != row.job.type()) differences.push_back("type");
  if (request.config_yaml() != row.job.config_yaml()) differences.push_back("config_yaml");
  if (request.output_dir() != row.requested_output_dir) differences.push_back("output_dir");
  if (!SameLabels(request.labels(), row.job.labels())) differences.push_back("labels");
  return differences;
}

bool SameCreatedFields(const v1::Job& a, const v1::Job& b) {
  return a.job_id() == b.job_id() && a.submission_id() == b.submission_id() &&
         a.type() == b.type() && a.config_yaml() == b.config_yaml() &&
         a.output_dir() == b.output_dir() && SameLabels(a.labels(), b.labels()) &&
         a.create_time().seconds() == b.create_time().seconds() &&
         a.create_time().nanos() == b.create_time().nanos();
}

absl::StatusOr<std::optional<Row>> SelectRow(SqliteDatabase& db, const std::string& where,
                                             const std::string& key) {
  absl::StatusOr<SqliteStatement> select =
      db.Prepare(absl::StrCat("SELECT ", kColumns, " FROM jobs WHERE ", where, " = ?"));
  if (!select.ok()) return select.status();
  select->Bind(1, key);
  absl::StatusOr<bool> found = select->Step();
  if (!found.ok()) return found.status();
  if (!*found) return std::nullopt;
  return ReadRow(*select);
}

// "?, ?, ?" for `count` parameters.
std::string Placeholders(size_t count) {
  std::vector<std::string> marks(count, "?");
  return absl::StrJoin(marks, ", ");
}

}  // namespace

absl::Status ValidateSubmitRequest(const v1::SubmitJobRequest& request) {
  const std::string& id = request.submission_id();
  if (id.empty() || id.size() > kMaxSubmissionIdLength) {
    return absl::InvalidArgumentError(absl::StrCat("submission_id must have 1 to ",
                                                   kMaxSubmissionIdLength, " characters; it has ",
                                                   id.size()));
  }
  const auto allowed = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  };
  if (!std::all_of(id.begin(), id.end(), allowed)) {
    return absl::InvalidArgumentError(
        absl::StrCat("submission_id \"", id, "\" has a character outside [A-Za-z0-9._-]"));
  }
  if (request.type() == v1::JOB_TYPE_UNSPECIFIED || !v1::JobType_IsValid(request.type())) {
    return absl::InvalidArgumentError("type must be set to a job type");
  }
  if (request.labels_size() > kMaxLabels) {
    return absl::InvalidArgumentError(
        absl::StrCat("at most ", kMaxLabels, " labels; the request has ", request.labels_size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<JobStore>> JobStore::Open(const std::filesystem::path& file) {
  absl::StatusOr<std::unique_ptr<SqliteDatabase>> db = SqliteDatabase::Open(file);
  if (!db.ok()) return db.status();
  if (absl::Status status = (*db)->Execute(kSchema); !status.ok()) return status;
  return std::unique_ptr<JobStore>(new JobStore(*std::move(db)));
}

absl::StatusOr<std::optional<v1::Job>> JobStore::FindSubmission(
    const v1::SubmitJobRequest& request) {
  std::lock_guard lock(mutex_);
  return FindSubmissionLocked(request);
}

absl::StatusOr<std::optional<v1::Job>> JobStore::FindSubmissionLocked(
    const v1::SubmitJobRequest& request) {
  absl::StatusOr<std::optional<Row>> row =
      SelectRow(*db_, "submission_id", request.submission_id());
  if (!row.ok()) return row.status();
  if (!row->has_value()) return std::nullopt;
  const std::vector<std::string> differences = Differences(request, **row);
  if (!differences.empty()) {
    return absl::AlreadyExistsError(
        absl::StrCat("submission_id \"", request.submission_id(), "\" was used for job ",
                     (*row)->job.job_id(), " with a different ", absl::StrJoin(differences, ", ")));
  }
  return (*row)->job;
}

absl::StatusOr<JobStore::CreateResult> JobStore::Create(const v1::SubmitJobRequest& request,
                                                        const std::string& job_id,
                                                        const std::string& output_dir,
                                                        absl::Time create_time) {
  if (absl::Status status = ValidateSubmitRequest(request); !status.ok()) return status;
  std::lock_guard lock(mutex_);
  absl::StatusOr<SqliteTransaction> transaction = SqliteTransaction::Begin(*db_);
  if (!transaction.ok()) return transaction.status();
  absl::StatusOr<std::optional<v1::Job>> existing = FindSubmissionLocked(request);
  if (!existing.ok()) return existing.status();
  if (existing->has_value()) return CreateResult{.job = **existing, .created = false};

  v1::Job job;
  job.set_job_id(job_id);
  job.set_submission_id(request.submission_id());
  job.set_type(request.type());
  job.set_state(v1::JOB_STATE_QUEUED);
  job.set_config_yaml(request.config_yaml());
  job.set_output_dir(output_dir);
  *job.mutable_labels() = request.labels();
  job.mutable_progress()->set_stage(request.type());
  *job.mutable_create_time() = TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(create_time));

  absl::StatusOr<SqliteStatement> insert = db_->Prepare(
      absl::StrCat("INSERT INTO jobs (", kColumns, ") VALUES (", Placeholders(kColumnCount), ")"));
  if (!insert.ok()) return insert.status();
  insert->Bind(1, job.job_id());
  insert->Bind(2, job.submission_id());
  insert->Bind(3, int64_t{job.type()});
  insert->Bind(4, int64_t{job.state()});
  insert->Bind(5, job.config_yaml());
  insert->Bind(6, job.output_dir());
  insert->Bind(7, LabelsJson(job.labels()));
  const v1::JobProgress& progress = job.progress();
  insert->Bind(8, job.failure_reason());
  insert->Bind(9, std::optional<int64_t>());
  insert->Bind(10, int64_t{job.attempt()});
  insert->Bind(11, job.last_checkpoint());
  insert->Bind(12, TimeUtil::TimestampToNanoseconds(job.create_time()));
  insert->Bind(13, std::optional<int64_t>());
  insert->Bind(14, std::optional<int64_t>());
  insert->Bind(15, static_cast<int64_t>(progress.step()));
  insert->Bind(16, static_cast<int64_t>(progress.total_steps()));
  insert->Bind(17, std::optional<double>());
  insert->Bind(18, std::optional<double>());
  insert->Bind(19, progress.tokens_per_second());
  insert->Bind(20, int64_t{progress.stage()});
  insert->Bind(21, std::optional<int64_t>());
  insert->Bind(22, std::optional<int64_t>());
  insert->Bind(23, request.output_dir());
  if (absl::Status status = insert->Run(); !status.ok()) return status;
  if (absl::Status status = transaction->Commit(); !status.ok()) return status;
  return CreateResult{.job = std::move(job), .created = true};
}

absl::StatusOr<v1::Job> JobStore::Get(const std::string& job_id) {
  std::lock_guard lock(mutex_);
  return GetLocked(job_id);
}

absl::StatusOr<v1::Job> JobStore::GetLocked(const std::string& job_id) {
  absl::StatusOr<std::optional<Row>> row = SelectRow(*db_, "job_id", job_id);
  if (!row.ok()) return row.status();
  if (!row->has_value()) return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
  return std::move((*row)->job);
}

absl::StatusOr<v1::ListJobsResponse> JobStore::List(const v1::ListJobsRequest& request) {
  std::set<int> states, types;
  for (const int state : request.states()) {
    if (state == v1::JOB_STATE_UNSPECIFIED || !v1::JobState_IsValid(state)) {
      return absl::InvalidArgumentError(absl::StrCat("states: ", state, " is not a job state"));
    }
    states.insert(state);
  }
  for (const int type : request.types()) {
    if (type == v1::JOB_TYPE_UNSPECIFIED || !v1::JobType_IsValid(type)) {
      return absl::InvalidArgumentError(absl::StrCat("types: ", type, " is not a job type"));
    }
    types.insert(type);
  }
  const std::string filter =
      absl::StrCat("states=", absl::StrJoin(states, ","), ";types=", absl::StrJoin(types, ","));
  uint32_t page_size = request.page_size() == 0 ? kDefaultPageSize : request.page_size();
  page_size = std::min(page_size, kMaxPageSize);

  std::lock_guard lock(mutex_);
  int64_t after_seq = std::numeric_limits<int64_t>::max();
  if (!request.page_token().empty()) {
    absl::StatusOr<SqliteStatement> token =
        db_->Prepare("SELECT filter, after_seq FROM page_tokens WHERE token = ?");
    if (!token.ok()) return token.status();
    token->Bind(1, request.page_token());
    absl::StatusOr<bool> found = token->Step();
    if (!found.ok()) return found.status();
    if (!*found) {
      return absl::InvalidArgumentError("page_token was not issued by this trainer (or expired)");
    }
    if (token->Text(0) != filter) {
      return absl::InvalidArgumentError(
          "page_token belongs to a listing with other filters; pass the same states and types");
    }
    after_seq = token->Int(1);
  }

  std::string sql = absl::StrCat("SELECT ", kColumns, ", seq FROM jobs WHERE seq < ?");
  if (!states.empty()) absl::StrAppend(&sql, " AND state IN (", Placeholders(states.size()), ")");
  if (!types.empty()) absl::StrAppend(&sql, " AND type IN (", Placeholders(types.size()), ")");
  absl::StrAppend(&sql, " ORDER BY seq DESC LIMIT ?");
  absl::StatusOr<SqliteStatement> select = db_->Prepare(sql);
  if (!select.ok()) return select.status();
  int index = 1;
  select->Bind(index++, after_seq);
  for (const int state : states) select->Bind(index++, int64_t{state});
  for (const int type : types) select->Bind(index++, int64_t{type});
  select->Bind(index++, int64_t{page_size} + 1);  // one more says whether a next page exists

  v1::ListJobsResponse response;
  int64_t last_seq = 0;
  bool more = false;
  while (true) {
    absl::StatusOr<bool> row = select->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    if (response.jobs_size() == static_cast<int>(page_size)) {
      more = true;
      break;
    }
    *response.add_jobs() = ReadRow(*select).job;
    last_seq = select->Int(kColumnCount);
  }
  if (more) {
    absl::StatusOr<std::string> token = IssuePageToken(filter, last_seq);
    if (!token.ok()) return token.status();
    response.set_next_page_token(*std::move(token));
  }
  return response;
}

absl::StatusOr<std::string> JobStore::IssuePageToken(const std::string& filter, int64_t after_seq) {
  const std::string token = rpc::RandomHex(16);
  const int64_t now = absl::ToUnixNanos(absl::Now());
  absl::StatusOr<SqliteStatement> insert = db_->Prepare(
      "INSERT INTO page_tokens (token, filter, after_seq, issue_time_ns) VALUES (?, ?, ?, ?)");
  if (!insert.ok()) return insert.status();
  insert->Bind(1, token);
  insert->Bind(2, filter);
  insert->Bind(3, after_seq);
  insert->Bind(4, now);
  if (absl::Status status = insert->Run(); !status.ok()) return status;
  absl::StatusOr<SqliteStatement> prune =
      db_->Prepare("DELETE FROM page_tokens WHERE issue_time_ns < ?");
  if (!prune.ok()) return prune.status();
  prune->Bind(1, now - absl::ToInt64Nanoseconds(kPageTokenLifetime));
  if (absl::Status status = prune->Run(); !status.ok()) return status;
  return token;
}

absl::StatusOr<v1::Job> JobStore::Update(const std::string& job_id,
                                         const std::function<void(v1::Job&)>& change) {
  std::lock_guard lock(mutex_);
  absl::StatusOr<SqliteTransaction> transaction = SqliteTransaction::Begin(*db_);
  if (!transaction.ok()) return transaction.status();
  absl::StatusOr<v1::Job> job = GetLocked(job_id);
  if (!job.ok()) return job.status();
  const v1::Job before = *job;
  change(*job);
  if (!SameCreatedFields(before, *job)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, ": the fields SubmitJob set cannot change after the job is created"));
  }
  absl::StatusOr<SqliteStatement> update =
      db_->Prepare(absl::StrCat("UPDATE jobs SET ", kMutableColumns, " WHERE job_id = ?"));
  if (!update.ok()) return update.status();
  const int next = BindMutable(*update, *job, 1);
  update->Bind(next, job_id);
  if (absl::Status status = update->Run(); !status.ok()) return status;
  if (absl::Status status = transaction->Commit(); !status.ok()) return status;
  return job;
}

absl::StatusOr<std::vector<v1::Job>> JobStore::InStates(const std::vector<v1::JobState>& states) {
  std::lock_guard lock(mutex_);
  absl::StatusOr<SqliteStatement> select =
      db_->Prepare(absl::StrCat("SELECT ", kColumns, " FROM jobs WHERE state IN (",
                                Placeholders(states.size()), ") ORDER BY seq ASC"));
  if (!select.ok()) return select.status();
  for (size_t i = 0; i < states.size(); ++i) {
    select->Bind(static_cast<int>(i) + 1, int64_t{states[i]});
  }
  std::vector<v1::Job> jobs;
  while (true) {
    absl::StatusOr<bool> row = select->Step();
    if (!row.ok()) return row.status();
    if (!*row) return jobs;
    jobs.push_back(ReadRow(*select).job);
  }
}

absl::StatusOr<std::map<v1::JobState, int64_t>> JobStore::CountByState() {
  std::lock_guard lock(mutex_);
  absl::StatusOr<SqliteStatement> select =
      db_->Prepare("SELECT state, COUNT(*) FROM jobs GROUP BY state");
  if (!select.ok()) return select.status();
  std::map<v1::JobState, int64_t> counts;
  while (true) {
    absl::StatusOr<bool> row = select->Step();
    if (!row.ok()) return row.status();
    if (!*row) return counts;
    counts[static_cast<v1::JobState>(select->Int(0))] = select->Int(1);
  }
}

}  // namespace specd::trainer
