#include "tests/unit/services/trainer/service/trainer_harness.h"

#include <stdlib.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/rpc/status.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"
#include "tests/support/subprocess.h"
#include "training/byte_tokenizer.h"

namespace specd::trainer::testing {
namespace {

// A directory removed when the test binary exits.
struct SharedDirectory {
  SharedDirectory() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "specd_trainer_data_XXXXXX").string();
    if (mkdtemp(pattern.data()) != nullptr) path = pattern;
  }
  ~SharedDirectory() { std::filesystem::remove_all(path); }
  std::filesystem::path path;
};

std::string PackConfigFor(const TrainingData& data) {
  return absl::StrCat("# packed texts for the trainer's tests\ninput: ", data.texts.string(),
                      "\ntokenizer: ", (data.tokenizer_dir / "tokenizer.json").string(),
                      "\nsequence_length: 64\nvalidation_fraction: 0.1\nseed: 1\n");
}

TrainingData MakeTrainingData() {
  static SharedDirectory directory;
  const std::filesystem::path root = directory.path;
  TrainingData data{
      .dir = root,
      .tokenizer_dir = root / "tokenizer",
      .texts = root / "texts.jsonl",
      .packed = root / "packed",
      .model_config = ::specd::testing::SharedDir() / "fixtures" / "qwen35-tiny-a" / "config.json"};
  EXPECT_TRUE(train::WriteByteLevelTokenizer(data.tokenizer_dir).ok());
  std::ofstream texts(data.texts);
  for (int i = 0; i < 48; ++i) {
    texts << absl::StrFormat(
        "{\"text\": \"Document %d: the quick brown fox jumps over the lazy dog %d times, and the "
        "trainer counts every step of it until the loss goes down.\"}\n",
        i, i * 7);
  }
  texts.close();
  const std::filesystem::path config = root / "pack.yaml";
  std::ofstream(config) << PackConfigFor(data) << "out: " << data.packed.string() << "\n";
  const ::specd::testing::ProcessResult pack =
      ::specd::testing::RunProcess({SPECD_BINARY, "train", "pack", "--config", config.string()});
  EXPECT_EQ(pack.exit_code, 0) << pack.err;
  return data;
}

}  // namespace

const TrainingData& SharedTrainingData() {
  static const TrainingData data = MakeTrainingData();
  return data;
}

std::string PackConfig() { return PackConfigFor(SharedTrainingData()); }

std::string PretrainConfig(int steps, int save_every) {
  const TrainingData& data = SharedTrainingData();
  return absl::StrCat(
      "model_config: ", data.model_config.string(), "\ntokenizer: ", data.tokenizer_dir.string(),
      "\ndata: ", data.packed.string(), "\nsteps: ", steps,
      "\nlr: 0.003\nvalidate_every: 0\nsave_every: ", save_every, "\nvalidation_sequences: 2\n");
}

TrainerHarness::TrainerHarness(const std::filesystem::path& work_root, int max_running_jobs,
                               const std::string& api_key) {
  absl::StatusOr<std::unique_ptr<TrainerServer>> trainer = TrainerServer::Create(
      {.work_root = work_root,
       .allowed_roots = {SharedTrainingData().dir, SharedTrainingData().model_config.parent_path()},
       .specd_binary = SPECD_BINARY,
       .max_running_jobs = max_running_jobs,
       .cancel_grace = absl::Seconds(2),
       .api_key = api_key},
      registry_);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return;
  trainer_ = *std::move(trainer);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(trainer_->service());
  server_ = builder.BuildAndStart();
  address_ = absl::StrCat("127.0.0.1:", port);
  stub_ = v1::TrainerService::NewStub(
      grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
}

void TrainerHarness::Stop() {
  if (trainer_) trainer_->Shutdown();
  if (server_) server_->Shutdown();
  server_.reset();
  trainer_.reset();
}

absl::StatusOr<v1::SubmitJobResponse> TrainerHarness::Submit(v1::JobType type,
                                                             const std::string& config,
                                                             const std::string& submission_id) {
  v1::SubmitJobRequest request;
  request.set_submission_id(submission_id);
  request.set_type(type);
  request.set_config_yaml(config);
  grpc::ClientContext context;
  v1::SubmitJobResponse response;
  const grpc::Status status = stub_->SubmitJob(&context, request, &response);
  if (!status.ok()) return rpc::FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::Job> TrainerHarness::Get(const std::string& job_id) {
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  grpc::ClientContext context;
  v1::GetJobResponse response;
  const grpc::Status status = stub_->GetJob(&context, request, &response);
  if (!status.ok()) return rpc::FromGrpcStatus(status);
  return response.job();
}

absl::StatusOr<v1::Job> TrainerHarness::WaitFor(const std::string& job_id,
                                                const std::function<bool(const v1::Job&)>& done,
                                                absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    absl::StatusOr<v1::Job> job = Get(job_id);
    if (!job.ok() || done(*job)) return job;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("waiting on ", job_id, ", last seen ", job->DebugString()));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

absl::StatusOr<std::vector<v1::LogLine>> TrainerHarness::ReadLogs(
    const v1::StreamLogsRequest& request) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(90));
  std::unique_ptr<grpc::ClientReader<v1::StreamLogsResponse>> reader =
      stub_->StreamLogs(&context, request);
  std::vector<v1::LogLine> lines;
  v1::StreamLogsResponse response;
  while (reader->Read(&response)) {
    for (const v1::LogLine& line : response.lines()) {
      if (!lines.empty() && line.line_number() != lines.back().line_number() + 1) {
        return absl::InternalError(absl::StrCat("line ", line.line_number(), " follows line ",
                                                lines.back().line_number()));
      }
      lines.push_back(line);
    }
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) return rpc::FromGrpcStatus(status);
  return lines;
}

bool ProcessRunningWith(const std::string& text) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream cmdline(entry.path() / "cmdline", std::ios::binary);
    std::stringstream arguments;
    arguments << cmdline.rdbuf();
    if (arguments.str().find(text) == std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string pid, name, state;
    stat >> pid >> name >> state;
    if (state != "Z") return true;
  }
  return false;
}

}  // namespace specd::trainer::testing
