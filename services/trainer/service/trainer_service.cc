#include "services/trainer/service/trainer_service.h"

#include <algorithm>
#include <filesystem>

#include "absl/time/clock.h"
#include "common/rpc/status.h"
#include "services/trainer/service/job_log.h"
#include "services/trainer/service/job_names.h"

namespace specd::trainer {
namespace {

// How often a following stream looks for new lines and the job's state.
constexpr absl::Duration kFollowInterval = absl::Milliseconds(100);
// Lines per StreamLogsResponse at most.
constexpr size_t kLinesPerMessage = 256;

}  // namespace

grpc::Status TrainerServiceImpl::SubmitJob(grpc::ServerContext* context,
                                           const v1::SubmitJobRequest* request,
                                           v1::SubmitJobResponse* response) {
  if (grpc::Status denied = api_key_.Check(*context); !denied.ok()) return denied;
  absl::StatusOr<v1::SubmitJobResponse> submitted = runner_.Submit(*request);
  if (!submitted.ok()) return rpc::ToGrpcStatus(submitted.status());
  *response = *std::move(submitted);
  return grpc::Status::OK;
}

grpc::Status TrainerServiceImpl::GetJob(grpc::ServerContext* context,
                                        const v1::GetJobRequest* request,
                                        v1::GetJobResponse* response) {
  if (grpc::Status denied = api_key_.Check(*context); !denied.ok()) return denied;
  absl::StatusOr<v1::Job> job = store_.Get(request->job_id());
  if (!job.ok()) return rpc::ToGrpcStatus(job.status());
  *response->mutable_job() = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status TrainerServiceImpl::ListJobs(grpc::ServerContext* context,
                                          const v1::ListJobsRequest* request,
                                          v1::ListJobsResponse* response) {
  if (grpc::Status denied = api_key_.Check(*context); !denied.ok()) return denied;
  absl::StatusOr<v1::ListJobsResponse> listed = store_.List(*request);
  if (!listed.ok()) return rpc::ToGrpcStatus(listed.status());
  *response = *std::move(listed);
  return grpc::Status::OK;
}

grpc::Status TrainerServiceImpl::CancelJob(grpc::ServerContext* context,
                                           const v1::CancelJobRequest* request,
                                           v1::CancelJobResponse* response) {
  if (grpc::Status denied = api_key_.Check(*context); !denied.ok()) return denied;
  absl::StatusOr<v1::Job> job = runner_.Cancel(request->job_id(), request->reason());
  if (!job.ok()) return rpc::ToGrpcStatus(job.status());
  *response->mutable_job() = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status TrainerServiceImpl::StreamLogs(grpc::ServerContext* context,
                                            const v1::StreamLogsRequest* request,
                                            grpc::ServerWriter<v1::StreamLogsResponse>* writer) {
  if (grpc::Status denied = api_key_.Check(*context); !denied.ok()) return denied;
  absl::StatusOr<v1::Job> job = store_.Get(request->job_id());
  if (!job.ok()) return rpc::ToGrpcStatus(job.status());
  JobLogReader reader(std::filesystem::path(job->output_dir()) / "job.log");
  uint64_t next_line = 0;  // number of the next line the reader returns
  // The first line to send; with tail_lines, known once the log's current end is.
  uint64_t first_line =
      request->start_case() == v1::StreamLogsRequest::kFromLine ? request->from_line() : 0;
  bool first_read = true;
  while (true) {
    // The state is read before the lines: a job is terminal only after its last line is written.
    bool terminal = IsTerminal(job->state());
    if (request->follow() && !first_read) {
      absl::StatusOr<v1::Job> now = store_.Get(request->job_id());
      if (!now.ok()) return rpc::ToGrpcStatus(now.status());
      terminal = IsTerminal(now->state());
    }
    std::vector<std::string> lines = reader.ReadNewLines();
    if (first_read && request->start_case() == v1::StreamLogsRequest::kTailLines) {
      first_line = lines.size() - std::min<uint64_t>(lines.size(), request->tail_lines());
    }
    first_read = false;
    v1::StreamLogsResponse response;
    for (std::string& text : lines) {
      const uint64_t number = next_line++;
      if (number < first_line) continue;
      v1::LogLine* line = response.add_lines();
      line->set_line_number(number);
      line->set_text(std::move(text));
      if (static_cast<size_t>(response.lines_size()) == kLinesPerMessage) {
        if (!writer->Write(response))
          return grpc::Status(grpc::StatusCode::CANCELLED, "client gone");
        response.Clear();
      }
    }
    if (response.lines_size() > 0 && !writer->Write(response)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "client gone");
    }
    if (!request->follow() || terminal) return grpc::Status::OK;
    if (context->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the stream");
    }
    if (stopping_) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the trainer is shutting down");
    }
    absl::SleepFor(kFollowInterval);
  }
}

}  // namespace specd::trainer
