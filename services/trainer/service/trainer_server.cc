#include "services/trainer/service/trainer_server.h"

#include "absl/strings/str_cat.h"

namespace specd::trainer {

absl::StatusOr<std::unique_ptr<TrainerServer>> TrainerServer::Create(
    const TrainerServerOptions& options, prometheus::Registry& registry) {
  std::error_code error;
  const std::filesystem::path work_root = std::filesystem::absolute(options.work_root, error);
  std::filesystem::create_directories(work_root, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot create the work root ",
                                            options.work_root.string(), ": ", error.message()));
  }
  if (!std::filesystem::is_regular_file(options.specd_binary)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the specd binary ", options.specd_binary.string(), " is not a file"));
  }
  std::unique_ptr<TrainerServer> server(new TrainerServer());
  server->metrics_ = std::make_unique<TrainerMetrics>(registry);
  absl::StatusOr<std::unique_ptr<JobStore>> store = JobStore::Open(work_root / "jobs.sqlite");
  if (!store.ok()) return store.status();
  server->store_ = *std::move(store);
  absl::StatusOr<std::unique_ptr<JobRunner>> runner =
      JobRunner::Create({.work_root = work_root,
                         .allowed_roots = options.allowed_roots,
                         .specd_binary = options.specd_binary,
                         .max_running_jobs = options.max_running_jobs,
                         .cancel_grace = options.cancel_grace,
                         .config_check_timeout = absl::Seconds(60)},
                        *server->store_, *server->metrics_);
  if (!runner.ok()) return runner.status();
  server->runner_ = *std::move(runner);
  server->service_ = std::make_unique<TrainerServiceImpl>(*server->store_, *server->runner_,
                                                          rpc::ApiKey(options.api_key));
  return server;
}

TrainerServer::~TrainerServer() { Shutdown(); }

void TrainerServer::Shutdown() {
  if (service_) service_->StopStreams();
  if (runner_) runner_->Shutdown();
}

}  // namespace specd::trainer
