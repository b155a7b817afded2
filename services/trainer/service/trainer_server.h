#pragma once
// The trainer as `specd serve --role trainer` runs it: a JobStore in <work_root>/jobs.sqlite, a
// JobRunner and the TrainerService, to be registered on a grpc::ServerBuilder.
//
//   auto trainer = TrainerServer::Create(options, registry);
//   builder.RegisterService((*trainer)->service());
//   ... server->Wait() ...
//   (*trainer)->Shutdown();   // before grpc::Server::Shutdown(): it ends following log streams
//   server->Shutdown();
#include <grpcpp/grpcpp.h>
#include <prometheus/registry.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/trainer/service/job_runner.h"
#include "services/trainer/service/job_store.h"
#include "services/trainer/service/trainer_metrics.h"
#include "services/trainer/service/trainer_service.h"

namespace specd::trainer {

struct TrainerServerOptions {
  // jobs.sqlite, trainer.lock, and jobs/<job_id>/ (the default output directories).
  std::filesystem::path work_root;
  // Besides work_root, what a job's output directory and every path in its config may lie under.
  std::vector<std::filesystem::path> allowed_roots;
  // The `specd` binary every job runs (the serving process can pass /proc/self/exe).
  std::filesystem::path specd_binary;
  int max_running_jobs = 1;
  // Between SIGTERM and SIGKILL when a running job is cancelled or the trainer stops.
  absl::Duration cancel_grace = absl::Seconds(10);
  // What every call must carry as `authorization: Bearer` metadata; empty: none.
  std::string api_key;
};

class TrainerServer {
 public:
  // Opens the store, resumes the jobs a previous trainer left RUNNING, and starts the queue.
  // FAILED_PRECONDITION if another trainer runs on the same work root.
  static absl::StatusOr<std::unique_ptr<TrainerServer>> Create(const TrainerServerOptions& options,
                                                               prometheus::Registry& registry);
  ~TrainerServer();  // Shutdown()

  grpc::Service* service() { return service_.get(); }

  // Ends following log streams, then stops every job's process (SIGTERM, SIGKILL after the
  // grace period); the jobs stay RUNNING in the store and resume at the next start. Idempotent.
  void Shutdown();

 private:
  TrainerServer() = default;

  std::unique_ptr<TrainerMetrics> metrics_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<JobRunner> runner_;
  std::unique_ptr<TrainerServiceImpl> service_;
};

}  // namespace specd::trainer
