#pragma once
// specd.v1.TrainerService on gRPC's synchronous API: the RPCs of trainer.proto over a JobStore
// (reads) and a JobRunner (submission, cancellation), each behind the server's API key.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <utility>

#include "common/rpc/api_key.h"
#include "services/trainer/service/job_runner.h"
#include "services/trainer/service/job_store.h"
#include "specd/v1/trainer.grpc.pb.h"

namespace specd::trainer {

class TrainerServiceImpl final : public v1::TrainerService::Service {
 public:
  TrainerServiceImpl(JobStore& store, JobRunner& runner, rpc::ApiKey api_key)
      : store_(store), runner_(runner), api_key_(std::move(api_key)) {}

  grpc::Status SubmitJob(grpc::ServerContext* context, const v1::SubmitJobRequest* request,
                         v1::SubmitJobResponse* response) override;
  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                      v1::GetJobResponse* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::CancelJobRequest* request,
                         v1::CancelJobResponse* response) override;
  // Polls job.log; a following stream ends when the client cancels, when the job is terminal
  // and its log fully sent, or (UNAVAILABLE) when StopStreams() is called.
  grpc::Status StreamLogs(grpc::ServerContext* context, const v1::StreamLogsRequest* request,
                          grpc::ServerWriter<v1::StreamLogsResponse>* writer) override;

  // Ends every following StreamLogs, so that a server shutdown does not wait on them.
  void StopStreams() { stopping_ = true; }

 private:
  JobStore& store_;
  JobRunner& runner_;
  const rpc::ApiKey api_key_;
  std::atomic<bool> stopping_ = false;
};

}  // namespace specd::trainer
