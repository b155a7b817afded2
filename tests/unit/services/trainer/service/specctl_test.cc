// The `specctl jobs` commands as a user runs them: the real binary against a real trainer served
// in this test process.
#include <gtest/gtest.h>

#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "services/trainer/service/job_names.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/services/trainer/service/trainer_harness.h"

namespace specd::trainer {
namespace {

using ::specd::testing::ProcessResult;
using ::specd::testing::RunProcess;

// The value of "key:" in specctl's key: value output.
std::string Field(const std::string& output, const std::string& key) {
  const std::string prefix = key + ":";
  size_t start = output.find(prefix);
  if (start == std::string::npos) return "";
  start = output.find_first_not_of(' ', start + prefix.size());
  return output.substr(start, output.find('\n', start) - start);
}

class SpecctlTest : public ::testing::Test {
 protected:
  SpecctlTest() : trainer_(work_root_.path()) {}

  ProcessResult Specctl(std::vector<std::string> args) {
    args.insert(args.begin(), {SPECCTL_BINARY, "--addr", trainer_.address()});
    return RunProcess(args);
  }

  std::filesystem::path WriteConfig(const std::string& name, const std::string& text) {
    const std::filesystem::path path = files_.path() / name;
    std::ofstream(path) << text;
    return path;
  }

  specd::testing::TempDir work_root_;
  specd::testing::TempDir files_;
  testing::TrainerHarness trainer_;
};

TEST_F(SpecctlTest, SubmitListGetLogsAndCancel) {
  const std::string pack = WriteConfig("pack.yaml", testing::PackConfig()).string();
  const ProcessResult submitted = Specctl({"jobs", "submit", "pack", "--config", pack,
                                           "--submission-id", "pack-once", "--label", "team=x"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const std::string id = Field(submitted.out, "job_id");
  EXPECT_TRUE(id.starts_with("job-")) << submitted.out;
  EXPECT_EQ(Field(submitted.out, "created"), "true");
  const ProcessResult again = Specctl({"jobs", "submit", "pack", "--config", pack,
                                       "--submission-id", "pack-once", "--label", "team=x"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(Field(again.out, "job_id"), id);
  EXPECT_EQ(Field(again.out, "created"), "false");

  // Followed, the log ends with the job.
  const ProcessResult logs = Specctl({"jobs", "logs", id, "--follow"});
  ASSERT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_TRUE(absl::StrContains(logs.out, "[trainer] attempt 1 of job " + id)) << logs.out;
  EXPECT_TRUE(absl::StrContains(logs.out, "succeeded")) << logs.out;
  const ProcessResult tail = Specctl({"jobs", "logs", id, "--tail", "1"});
  EXPECT_EQ(std::count(tail.out.begin(), tail.out.end(), '\n'), 1) << tail.out;

  const ProcessResult got = Specctl({"jobs", "get", id, "--json"});
  ASSERT_EQ(got.exit_code, 0) << got.err;
  const nlohmann::json job = nlohmann::json::parse(got.out);
  EXPECT_EQ(job["jobId"], id);
  EXPECT_EQ(job["state"], "JOB_STATE_SUCCEEDED");
  EXPECT_EQ(job["labels"]["team"], "x");
  const ProcessResult human = Specctl({"jobs", "get", id});
  EXPECT_EQ(Field(human.out, "state"), "succeeded");
  EXPECT_EQ(Field(human.out, "type"), "pack");

  const std::string pretrain =
      WriteConfig("pretrain.yaml", testing::PretrainConfig(100000, 1000)).string();
  const ProcessResult long_job = Specctl({"jobs", "submit", "pretrain", "--config", pretrain});
  ASSERT_EQ(long_job.exit_code, 0) << long_job.err;
  const std::string long_id = Field(long_job.out, "job_id");
  ASSERT_TRUE(
      trainer_
          .WaitFor(long_id, [](const v1::Job& job) { return job.state() == v1::JOB_STATE_RUNNING; })
          .ok());

  const ProcessResult listed = Specctl({"jobs", "list"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_TRUE(listed.out.starts_with("JOB ID")) << listed.out;
  EXPECT_LT(listed.out.find(long_id), listed.out.find(id)) << "newest first:\n" << listed.out;
  const ProcessResult running = Specctl({"jobs", "list", "--state", "running", "--json"});
  ASSERT_EQ(running.exit_code, 0) << running.err;
  const nlohmann::json jobs = nlohmann::json::parse(running.out)["jobs"];
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0]["jobId"], long_id);

  const ProcessResult cancelled = Specctl({"jobs", "cancel", long_id, "--reason", "test over"});
  ASSERT_EQ(cancelled.exit_code, 0) << cancelled.err;
  EXPECT_EQ(Field(cancelled.out, "state"), "cancelling");
  EXPECT_TRUE(
      trainer_
          .WaitFor(long_id,
                   [](const v1::Job& job) { return job.state() == v1::JOB_STATE_CANCELLED; })
          .ok());
}

TEST_F(SpecctlTest, ErrorsPrintTheCodeNameAndExitWithOne) {
  const ProcessResult unknown = Specctl({"jobs", "get", "job-nope"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_TRUE(unknown.err.starts_with("specctl: NOT_FOUND: ")) << unknown.err;

  const std::string typo =
      WriteConfig("typo.yaml", testing::PackConfig() + "lr_sched: cosine\n").string();
  const ProcessResult invalid = Specctl({"jobs", "submit", "pack", "--config", typo});
  EXPECT_EQ(invalid.exit_code, 1);
  EXPECT_EQ(invalid.err, "specctl: INVALID_ARGUMENT: config: unknown keys: lr_sched\n");

  const ProcessResult unreachable =
      RunProcess({SPECCTL_BINARY, "--addr", "127.0.0.1:1", "--timeout", "2", "jobs", "list"});
  EXPECT_EQ(unreachable.exit_code, 1);
  EXPECT_TRUE(unreachable.err.starts_with("specctl: UNAVAILABLE: ")) << unreachable.err;
}

}  // namespace
}  // namespace specd::trainer
