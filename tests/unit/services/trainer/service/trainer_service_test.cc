// The trainer end to end in one test process: a real gRPC server on 127.0.0.1, real jobs run by
// the built `specd` binary on tiny data. Each job type's command line is PlanJob's (tested alone);
// here: the life cycle, logs, failures, cancellation, the queue and a trainer restart.
#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <sstream>

#include "absl/strings/match.h"
#include "common/metrics/exposition.h"
#include "services/trainer/service/job_names.h"
#include "services/trainer/service/job_store.h"
#include "tests/support/paths.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/services/trainer/service/trainer_harness.h"

namespace specd::trainer {
namespace {

using testing::PackConfig;
using testing::PretrainConfig;
using testing::ProcessRunningWith;
using testing::TrainerHarness;

bool InState(const v1::Job& job, v1::JobState state) { return job.state() == state; }

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class TrainerServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::SharedTrainingData(); }
  specd::testing::TempDir work_root_;
};

TEST_F(TrainerServiceTest, APackJobSucceedsAndItsLogStreamsToTheEnd) {
  TrainerHarness trainer(work_root_.path());
  absl::StatusOr<v1::SubmitJobResponse> submitted =
      trainer.Submit(v1::JOB_TYPE_PACK, PackConfig(), "pack-1");
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_TRUE(submitted->created());
  const std::string id = submitted->job().job_id();
  const std::filesystem::path output_dir = submitted->job().output_dir();
  EXPECT_EQ(output_dir, work_root_.path() / "jobs" / id);

  // Followed from the start, the stream ends by itself once the job has finished.
  v1::StreamLogsRequest follow;
  follow.set_job_id(id);
  follow.set_follow(true);
  absl::StatusOr<std::vector<v1::LogLine>> lines = trainer.ReadLogs(follow);
  ASSERT_TRUE(lines.ok()) << lines.status();
  absl::StatusOr<v1::Job> job = trainer.Get(id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED) << job->DebugString();
  EXPECT_EQ(job->exit_code(), 0);
  EXPECT_EQ(job->attempt(), 1u);
  EXPECT_TRUE(job->failure_reason().empty());
  EXPECT_TRUE(job->has_start_time() && job->has_end_time());
  EXPECT_TRUE(std::filesystem::exists(output_dir / "manifest.json"));
  EXPECT_NE(ReadFile(output_dir / "config.yaml").find("out: \"" + output_dir.string() + "\""),
            std::string::npos);

  ASSERT_GE(lines->size(), 2u);
  EXPECT_EQ(lines->front().line_number(), 0u);
  EXPECT_TRUE(absl::StrContains(lines->front().text(), "[trainer] attempt 1 of job " + id))
      << lines->front().text();
  EXPECT_TRUE(absl::StrContains(lines->back().text(), "ended (exit status 0): succeeded"))
      << lines->back().text();

  // Without follow, from a line or the last lines of it.
  v1::StreamLogsRequest tail;
  tail.set_job_id(id);
  tail.set_tail_lines(1);
  absl::StatusOr<std::vector<v1::LogLine>> last = trainer.ReadLogs(tail);
  ASSERT_TRUE(last.ok());
  ASSERT_EQ(last->size(), 1u);
  EXPECT_EQ(last->front().line_number(), lines->back().line_number());
  v1::StreamLogsRequest from;
  from.set_job_id(id);
  from.set_from_line(1);
  absl::StatusOr<std::vector<v1::LogLine>> rest = trainer.ReadLogs(from);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest->size(), lines->size() - 1);
  EXPECT_EQ(rest->front().line_number(), 1u);

  const std::string exposition = metrics::Exposition(trainer.registry());
  EXPECT_TRUE(absl::StrContains(exposition, "specd_trainer_jobs{state=\"succeeded\"} 1"))
      << exposition;
  EXPECT_TRUE(
      absl::StrContains(exposition, "specd_trainer_jobs_finished_total{state=\"succeeded\"} 1"));
}

TEST_F(TrainerServiceTest, AQuantizeJobWritesItsCheckpointIntoTheModelSubdirectory) {
  TrainerHarness trainer(work_root_.path());
  const std::filesystem::path dense = ::specd::testing::SharedDir() / "fixtures" / "qwen35-tiny-a";
  absl::StatusOr<v1::SubmitJobResponse> submitted =
      trainer.Submit(v1::JOB_TYPE_QUANTIZE,
                     "model: " + dense.string() + "\nmethod: rtn\ngroup_size: 32\n", "quantize-1");
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  absl::StatusOr<v1::Job> job = trainer.WaitFor(
      submitted->job().job_id(), [](const v1::Job& job) { return IsTerminal(job.state()); });
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED) << job->failure_reason();
  EXPECT_TRUE(
      absl::StrContains(ReadFile(job->output_dir() + "/model/config.json"), "quantization_config"));
  EXPECT_GT(job->progress().total_steps(), 0u);  // from its "[done/total]" lines
}

TEST_F(TrainerServiceTest, SubmittingAgainReturnsTheSameJobAndADifferentRequestIsRefused) {
  TrainerHarness trainer(work_root_.path());
  absl::StatusOr<v1::SubmitJobResponse> first =
      trainer.Submit(v1::JOB_TYPE_PACK, PackConfig(), "retry-me");
  absl::StatusOr<v1::SubmitJobResponse> again =
      trainer.Submit(v1::JOB_TYPE_PACK, PackConfig(), "retry-me");
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_TRUE(first->created());
  EXPECT_FALSE(again->created());
  EXPECT_EQ(again->job().job_id(), first->job().job_id());
  EXPECT_EQ(
      trainer.Submit(v1::JOB_TYPE_PACK, PackConfig() + "seed: 2\n", "retry-me").status().code(),
      absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(trainer.Submit(v1::JOB_TYPE_PACK, PackConfig(), "bad id!").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(trainer.Get("job-000000000000").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(TrainerServiceTest, AConfigWithAnUnknownKeyIsRefusedAtSubmission) {
  TrainerHarness trainer(work_root_.path());
  absl::StatusOr<v1::SubmitJobResponse> submitted =
      trainer.Submit(v1::JOB_TYPE_PACK, PackConfig() + "lr_sched: cosine\n", "typo");
  EXPECT_EQ(submitted.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(submitted.status().message(), "config: unknown keys: lr_sched");
  EXPECT_EQ(trainer.Submit(v1::JOB_TYPE_PIPELINE, "preset: huge\n", "huge").status().code(),
            absl::StatusCode::kInvalidArgument);

  grpc::ClientContext context;
  v1::ListJobsResponse listed;
  ASSERT_TRUE(trainer.stub().ListJobs(&context, v1::ListJobsRequest(), &listed).ok());
  EXPECT_EQ(listed.jobs_size(), 0);
}

TEST_F(TrainerServiceTest, WithAnApiKeyACallWithoutItIsUnauthenticatedAndSubmitsNothing) {
  TrainerHarness trainer(work_root_.path(), /*max_running_jobs=*/1, /*api_key=*/"sesame");
  EXPECT_EQ(trainer.Submit(v1::JOB_TYPE_PACK, PackConfig(), "keyless").status().code(),
            absl::StatusCode::kUnauthenticated);
  grpc::ClientContext wrong;
  wrong.AddMetadata("authorization", "Bearer open");
  v1::ListJobsResponse listed;
  EXPECT_EQ(trainer.stub().ListJobs(&wrong, v1::ListJobsRequest(), &listed).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext keyed;
  keyed.AddMetadata("authorization", "Bearer sesame");
  ASSERT_TRUE(trainer.stub().ListJobs(&keyed, v1::ListJobsRequest(), &listed).ok());
  EXPECT_EQ(listed.jobs_size(), 0);
  EXPECT_FALSE(std::filesystem::exists(work_root_.path() / "jobs"));
}

// What a client may make the trainer write or read: nothing outside its allowed roots (here the
// work root and the training data's directories), however the path gets there.
TEST_F(TrainerServiceTest, PathsOutsideTheAllowedRootsAreDeniedAtSubmissionTouchingNothing) {
  TrainerHarness trainer(work_root_.path());
  specd::testing::TempDir elsewhere;
  std::filesystem::create_directory_symlink(elsewhere.path(), work_root_.path() / "escape");
  const std::string tokenizer =
      (testing::SharedTrainingData().tokenizer_dir / "tokenizer.json").string();
  const auto submit = [&](const std::string& output_dir, const std::string& config) {
    v1::SubmitJobRequest request;
    request.set_submission_id("escape");
    request.set_type(v1::JOB_TYPE_PACK);
    request.set_config_yaml(config);
    request.set_output_dir(output_dir);
    grpc::ClientContext context;
    v1::SubmitJobResponse response;
    return trainer.stub().SubmitJob(&context, request, &response);
  };
  struct Escape {
    std::string what, output_dir, config;
  };
  const std::vector<Escape> escapes = {
      {"an absolute output_dir", (elsewhere.path() / "out").string(), PackConfig()},
      {"output_dir up with ..", "../" + elsewhere.path().filename().string(), PackConfig()},
      {"output_dir through a symlink", "escape/out", PackConfig()},
      {"an absolute input", "", "input: /etc/passwd\ntokenizer: " + tokenizer + "\n"},
      {"an input up with ..", "",
       "input: ../../../../../../../../etc/passwd\ntokenizer: " + tokenizer + "\n"},
      {"an out through a symlink", "",
       PackConfig() + "out: " + (work_root_.path() / "escape" / "packed").string() + "\n"}};
  for (const Escape& escape : escapes) {
    SCOPED_TRACE(escape.what);
    const grpc::Status status = submit(escape.output_dir, escape.config);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
    EXPECT_TRUE(absl::StrContains(status.error_message(), "outside the allowed roots"))
        << status.error_message();
  }
  EXPECT_TRUE(std::filesystem::is_empty(elsewhere.path()));
  EXPECT_FALSE(std::filesystem::exists(work_root_.path() / "jobs"));
  grpc::ClientContext context;
  v1::ListJobsResponse listed;
  ASSERT_TRUE(trainer.stub().ListJobs(&context, v1::ListJobsRequest(), &listed).ok());
  EXPECT_EQ(listed.jobs_size(), 0);
}

TEST_F(TrainerServiceTest, AJobWhoseProcessFailsIsFailedWithTheReason) {
  TrainerHarness trainer(work_root_.path());
  const std::string missing = (work_root_.path() / "nonexistent" / "texts.jsonl").string();
  const std::string config =
      "input: " + missing +
      "\ntokenizer: " + (testing::SharedTrainingData().tokenizer_dir / "tokenizer.json").string() +
      "\n";
  absl::StatusOr<v1::SubmitJobResponse> submitted =
      trainer.Submit(v1::JOB_TYPE_PACK, config, "missing-input");
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  absl::StatusOr<v1::Job> job = trainer.WaitFor(
      submitted->job().job_id(), [](const v1::Job& job) { return IsTerminal(job.state()); });
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(job->exit_code(), 1);
  EXPECT_TRUE(job->failure_reason().starts_with("exit status 1: specd train: "))
      << job->failure_reason();
  EXPECT_TRUE(absl::StrContains(job->failure_reason(), missing)) << job->failure_reason();
  grpc::ClientContext context;
  v1::CancelJobRequest cancel;
  cancel.set_job_id(job->job_id());
  v1::CancelJobResponse response;
  EXPECT_EQ(trainer.stub().CancelJob(&context, cancel, &response).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(TrainerServiceTest, CancellingARunningJobStopsItsProcess) {
  TrainerHarness trainer(work_root_.path());
  absl::StatusOr<v1::SubmitJobResponse> submitted =
      trainer.Submit(v1::JOB_TYPE_PRETRAIN, PretrainConfig(100000, 1000), "long");
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string id = submitted->job().job_id();
  // Running, with progress read from its output and its metrics.jsonl.
  absl::StatusOr<v1::Job> running = trainer.WaitFor(id, [](const v1::Job& job) {
    return job.state() == v1::JOB_STATE_RUNNING && job.progress().step() >= 2 &&
           job.progress().tokens_per_second() > 0;
  });
  ASSERT_TRUE(running.ok()) << running.status();
  EXPECT_EQ(running->progress().total_steps(), 100000u);
  EXPECT_TRUE(running->progress().has_loss());
  EXPECT_TRUE(running->progress().has_estimated_time_remaining());
  EXPECT_EQ(running->progress().stage(), v1::JOB_TYPE_PRETRAIN);
  const std::string config_file = running->output_dir() + "/config.yaml";
  EXPECT_TRUE(ProcessRunningWith(config_file));
  EXPECT_TRUE(absl::StrContains(metrics::Exposition(trainer.registry()),
                                "specd_trainer_job_step{job_id=\"" + id + "\",type=\"pretrain\"}"));

  grpc::ClientContext context;
  v1::CancelJobRequest cancel;
  cancel.set_job_id(id);
  cancel.set_reason("enough");
  v1::CancelJobResponse response;
  ASSERT_TRUE(trainer.stub().CancelJob(&context, cancel, &response).ok());
  EXPECT_EQ(response.job().state(), v1::JOB_STATE_CANCELLING);
  absl::StatusOr<v1::Job> cancelled = trainer.WaitFor(
      id, [](const v1::Job& job) { return InState(job, v1::JOB_STATE_CANCELLED); },
      absl::Seconds(20));
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_TRUE(cancelled->has_exit_code());
  EXPECT_TRUE(cancelled->has_end_time());
  EXPECT_FALSE(ProcessRunningWith(config_file));
  EXPECT_TRUE(absl::StrContains(ReadFile(cancelled->output_dir() + "/job.log"),
                                "cancel requested (enough)"));
}

TEST_F(TrainerServiceTest, AFollowingLogStreamEndsWhenTheClientCancelsIt) {
  TrainerHarness trainer(work_root_.path());
  absl::StatusOr<v1::SubmitJobResponse> submitted =
      trainer.Submit(v1::JOB_TYPE_PRETRAIN, PretrainConfig(100000, 1000), "followed");
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  grpc::ClientContext context;
  v1::StreamLogsRequest request;
  request.set_job_id(submitted->job().job_id());
  request.set_follow(true);
  request.set_tail_lines(0);  // only new lines
  std::unique_ptr<grpc::ClientReader<v1::StreamLogsResponse>> reader =
      trainer.stub().StreamLogs(&context, request);
  v1::StreamLogsResponse response;
  ASSERT_TRUE(reader->Read(&response));
  context.TryCancel();
  while (reader->Read(&response)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // gRPC's shutdown waits for every handler: it returns only if StreamLogs noticed the cancel.
  std::future<void> shutdown = std::async(std::launch::async, [&] { trainer.server().Shutdown(); });
  EXPECT_EQ(shutdown.wait_for(std::chrono::seconds(10)), std::future_status::ready);
}

TEST_F(TrainerServiceTest, JobsBeyondTheLimitWaitQueuedAndCanBeCancelledThere) {
  TrainerHarness trainer(work_root_.path(), /*max_running_jobs=*/1);
  absl::StatusOr<v1::SubmitJobResponse> first =
      trainer.Submit(v1::JOB_TYPE_PRETRAIN, PretrainConfig(100000, 1000), "first");
  absl::StatusOr<v1::SubmitJobResponse> second =
      trainer.Submit(v1::JOB_TYPE_PACK, PackConfig(), "second");
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_TRUE(trainer
                  .WaitFor(first->job().job_id(),
                           [](const v1::Job& job) { return InState(job, v1::JOB_STATE_RUNNING); })
                  .ok());
  EXPECT_EQ(trainer.Get(second->job().job_id())->state(), v1::JOB_STATE_QUEUED);

  for (const std::string& id : {second->job().job_id(), first->job().job_id()}) {
    grpc::ClientContext context;
    v1::CancelJobRequest cancel;
    cancel.set_job_id(id);
    v1::CancelJobResponse response;
    ASSERT_TRUE(trainer.stub().CancelJob(&context, cancel, &response).ok());
  }
  absl::StatusOr<v1::Job> queued = trainer.Get(second->job().job_id());
  EXPECT_EQ(queued->state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(queued->attempt(), 0u);
  EXPECT_FALSE(queued->has_start_time());
  EXPECT_TRUE(trainer
                  .WaitFor(first->job().job_id(),
                           [](const v1::Job& job) { return InState(job, v1::JOB_STATE_CANCELLED); })
                  .ok());
}

TEST_F(TrainerServiceTest, ARestartedTrainerResumesTheRunningJobFromItsCheckpoint) {
  std::string id;
  {
    TrainerHarness trainer(work_root_.path());
    absl::StatusOr<v1::SubmitJobResponse> submitted =
        trainer.Submit(v1::JOB_TYPE_PRETRAIN, PretrainConfig(150, 5), "resumable");
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    id = submitted->job().job_id();
    absl::StatusOr<v1::Job> checkpointed = trainer.WaitFor(id, [](const v1::Job& job) {
      return !job.last_checkpoint().empty() || IsTerminal(job.state());
    });
    ASSERT_TRUE(checkpointed.ok()) << checkpointed.status();
    ASSERT_EQ(checkpointed->state(), v1::JOB_STATE_RUNNING) << "the job finished too soon";
    EXPECT_EQ(checkpointed->last_checkpoint(), checkpointed->output_dir() + "/state");
  }  // the trainer stops: the job's process with it
  TrainerHarness restarted(work_root_.path());
  absl::StatusOr<v1::Job> resumed = restarted.Get(id);
  ASSERT_TRUE(resumed.ok());
  EXPECT_EQ(resumed->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(resumed->attempt(), 2u);
  absl::StatusOr<v1::Job> finished =
      restarted.WaitFor(id, [](const v1::Job& job) { return IsTerminal(job.state()); });
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_EQ(finished->state(), v1::JOB_STATE_SUCCEEDED) << finished->failure_reason();
  EXPECT_EQ(finished->progress().step(), 150u);
  const std::string log = ReadFile(finished->output_dir() + "/job.log");
  EXPECT_TRUE(absl::StrContains(log, "[trainer] attempt 2 of job " + id)) << log;
  EXPECT_TRUE(absl::StrContains(log, "pretrain: resuming after step")) << log;
}

TEST_F(TrainerServiceTest, AJobLeftCancellingByAPreviousTrainerIsCancelledAtTheNextStart) {
  {
    absl::StatusOr<std::unique_ptr<JobStore>> store =
        JobStore::Open(work_root_.path() / "jobs.sqlite");
    ASSERT_TRUE(store.ok()) << store.status();
    v1::SubmitJobRequest request;
    request.set_submission_id("left-cancelling");
    request.set_type(v1::JOB_TYPE_PACK);
    const std::string output_dir = (work_root_.path() / "jobs" / "job-left").string();
    ASSERT_TRUE((*store)->Create(request, "job-left", output_dir, absl::Now()).ok());
    ASSERT_TRUE((*store)
                    ->Update("job-left",
                             [](v1::Job& job) {
                               job.set_state(v1::JOB_STATE_CANCELLING);
                               job.set_attempt(1);
                             })
                    .ok());
  }
  TrainerHarness trainer(work_root_.path());
  absl::StatusOr<v1::Job> job = trainer.Get("job-left");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::JOB_STATE_CANCELLED);
  EXPECT_TRUE(job->has_end_time());
  EXPECT_EQ(job->attempt(), 1u);
}

TEST_F(TrainerServiceTest, ASecondTrainerOnTheSameWorkRootIsRefused) {
  TrainerHarness trainer(work_root_.path());
  prometheus::Registry registry;
  absl::StatusOr<std::unique_ptr<TrainerServer>> second =
      TrainerServer::Create({.work_root = work_root_.path(),
                             .allowed_roots = {},
                             .specd_binary = SPECD_BINARY,
                             .max_running_jobs = 1,
                             .cancel_grace = absl::Seconds(1),
                             .api_key = ""},
                            registry);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace specd::trainer
