#pragma once
// What the trainer's service tests share: small training data made once per test binary (a
// byte-level tokenizer, a few texts, a packed dataset), stage configs over it, and a real
// trainer behind a real gRPC server on 127.0.0.1, running the built `specd` binary.
#include <grpcpp/grpcpp.h>
#include <prometheus/registry.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/trainer/service/trainer_server.h"
#include "specd/v1/trainer.grpc.pb.h"

namespace specd::trainer::testing {

struct TrainingData {
  std::filesystem::path dir;            // holds the tokenizer, the texts and the packed texts
  std::filesystem::path tokenizer_dir;  // tokenizer.json, tokenizer_config.json
  std::filesystem::path texts;          // {"text": ...} lines
  std::filesystem::path packed;         // the texts packed (specd train pack)
  std::filesystem::path model_config;   // a tiny Qwen3.5 config.json
};

// Made on first use, removed when the test binary exits.
const TrainingData& SharedTrainingData();

// `specd train pack` of the texts, without `out` (the trainer adds it).
std::string PackConfig();
// `specd train pretrain` of a tiny model on the packed texts, without `out`.
std::string PretrainConfig(int steps, int save_every);

class TrainerHarness {
 public:
  // A trainer on `work_root` with a 2 s cancel grace, served on 127.0.0.1 on a free port; its
  // jobs may name paths under the work root and the training data's directories. With an
  // `api_key`, its calls need it (the harness's own calls send none).
  explicit TrainerHarness(const std::filesystem::path& work_root, int max_running_jobs = 1,
                          const std::string& api_key = "");
  ~TrainerHarness() { Stop(); }

  // Stops the trainer (its jobs stay RUNNING, to resume) and then the gRPC server.
  void Stop();

  v1::TrainerService::Stub& stub() { return *stub_; }
  grpc::Server& server() { return *server_; }
  const std::string& address() const { return address_; }
  prometheus::Registry& registry() { return registry_; }

  absl::StatusOr<v1::SubmitJobResponse> Submit(v1::JobType type, const std::string& config,
                                               const std::string& submission_id);
  absl::StatusOr<v1::Job> Get(const std::string& job_id);
  // Polls GetJob until `done` holds; DEADLINE_EXCEEDED (with the job's last state) otherwise.
  absl::StatusOr<v1::Job> WaitFor(const std::string& job_id,
                                  const std::function<bool(const v1::Job&)>& done,
                                  absl::Duration timeout = absl::Seconds(60));
  // Every line StreamLogs sends for `request`, checking that line numbers are consecutive.
  absl::StatusOr<std::vector<v1::LogLine>> ReadLogs(const v1::StreamLogsRequest& request);

 private:
  prometheus::Registry registry_;
  std::unique_ptr<TrainerServer> trainer_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::TrainerService::Stub> stub_;
  std::string address_;
};

// Whether a process whose command line contains `text` is running (not a zombie).
bool ProcessRunningWith(const std::string& text);

}  // namespace specd::trainer::testing
