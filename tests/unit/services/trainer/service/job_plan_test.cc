// PlanJob: which `specd` command a job type runs and what config.yaml its output directory gets.
#include "services/trainer/service/job_plan.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

namespace specd::trainer {
namespace {

const std::filesystem::path kOutputDir = "/work/jobs/job-1";
const std::vector<std::filesystem::path> kAllowedRoots = {"/work", "/data"};

JobPlan Plan(v1::JobType type, const std::string& yaml) {
  absl::StatusOr<JobPlan> plan = PlanJob(type, yaml, kOutputDir, kAllowedRoots);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : JobPlan{};
}

std::string Value(const std::string& yaml, const std::string& key) {
  return YAML::Load(yaml)[key].as<std::string>();
}

// The config's relative paths resolve against the output directory even when the dry run reads
// it from elsewhere, and every path it names is held to the allowed roots.
TEST(PlanJob, AStageRunsSpecdTrainOnTheConfigInTheOutputDirectoryConfinedToTheRoots) {
  const JobPlan plan = Plan(v1::JOB_TYPE_PRETRAIN, "steps: 10\n");
  EXPECT_EQ(plan.stage, "pretrain");
  EXPECT_EQ(plan.config_file(), kOutputDir / "config.yaml");
  const std::vector<std::string> rules = {"--base-dir", "/work/jobs/job-1", "--allowed-root",
                                          "/work",      "--allowed-root",   "/data"};
  std::vector<std::string> run = {"train", "pretrain", "--config", "/work/jobs/job-1/config.yaml"};
  run.insert(run.end(), rules.begin(), rules.end());
  EXPECT_EQ(plan.Arguments(plan.config_file(), false), run);
  std::vector<std::string> check = {"train", "pretrain", "--config", "/tmp/x.yaml"};
  check.insert(check.end(), rules.begin(), rules.end());
  check.push_back("--dry-run");
  EXPECT_EQ(plan.Arguments("/tmp/x.yaml", true), check);
}

TEST(PlanJob, AConfigWithoutOutGetsTheOutputDirectoryKeepingItsText) {
  const std::string submitted = "# my run\nsteps: 10  # short\nlr: 1.0e-3";
  const JobPlan plan = Plan(v1::JOB_TYPE_QAD, submitted);
  EXPECT_TRUE(plan.config_yaml.starts_with(submitted + "\n")) << plan.config_yaml;
  EXPECT_EQ(Value(plan.config_yaml, "out"), "/work/jobs/job-1");
  EXPECT_EQ(Value(plan.config_yaml, "steps"), "10");
  EXPECT_EQ(plan.run_dir, kOutputDir);
}

TEST(PlanJob, AGivenOutIsKeptAndResolvedAgainstTheOutputDirectory) {
  const std::string submitted = "out: ../shared-run\n";
  const JobPlan plan = Plan(v1::JOB_TYPE_DRAFTER_STAGE1, submitted);
  EXPECT_EQ(plan.config_yaml, submitted);
  EXPECT_EQ(plan.run_dir, "/work/jobs/shared-run");
  EXPECT_EQ(Plan(v1::JOB_TYPE_PACK, "out: /data/packed\n").run_dir, "/data/packed");
}

TEST(PlanJob, BothDrafterStagesRunTheDrafterStage) {
  EXPECT_EQ(Plan(v1::JOB_TYPE_DRAFTER_STAGE1, "").stage, "drafter");
  EXPECT_EQ(Plan(v1::JOB_TYPE_DRAFTER_STAGE2, "").stage, "drafter");
}

TEST(PlanJob, CheckpointWritersGetAnEmptySubdirectoryAndRegenerateAFile) {
  for (const v1::JobType type : {v1::JOB_TYPE_GPTQ_DRAFTER, v1::JOB_TYPE_QUANTIZE}) {
    const JobPlan plan = Plan(type, "");
    EXPECT_EQ(Value(plan.config_yaml, "out"), "/work/jobs/job-1/model");
    EXPECT_EQ(plan.run_dir, kOutputDir / "model");
  }
  EXPECT_EQ(Plan(v1::JOB_TYPE_QUANTIZE, "").stage, "quantize");
  const JobPlan regenerate = Plan(v1::JOB_TYPE_REGENERATE, "teacher: t\n");
  EXPECT_EQ(Value(regenerate.config_yaml, "output"), "/work/jobs/job-1/answers.jsonl");
  EXPECT_FALSE(YAML::Load(regenerate.config_yaml)["out"].IsDefined());
  EXPECT_TRUE(regenerate.run_dir.empty());
}

TEST(PlanJob, AFlowMappingIsWrittenOutAgainWithOut) {
  const JobPlan plan = Plan(v1::JOB_TYPE_PACK, "{input: a.jsonl, seed: 3}");
  EXPECT_EQ(Value(plan.config_yaml, "input"), "a.jsonl");
  EXPECT_EQ(Value(plan.config_yaml, "seed"), "3");
  EXPECT_EQ(Value(plan.config_yaml, "out"), "/work/jobs/job-1");
}

TEST(PlanJob, APipelineRunsItsPresetIntoTheOutputDirectory) {
  const JobPlan smoke = Plan(v1::JOB_TYPE_PIPELINE, "");
  EXPECT_EQ(
      smoke.Arguments(smoke.config_file(), false),
      (std::vector<std::string>{"pipeline", "--preset", "smoke", "--out", "/work/jobs/job-1"}));
  const JobPlan tiny = Plan(v1::JOB_TYPE_PIPELINE, "preset: tiny\n");
  EXPECT_EQ(tiny.Arguments(tiny.config_file(), true),
            (std::vector<std::string>{"pipeline", "--preset", "tiny", "--out", "/work/jobs/job-1",
                                      "--dry-run"}));
  EXPECT_EQ(tiny.run_dir, kOutputDir);
}

TEST(PlanJob, BadConfigsAreInvalidArguments) {
  for (const auto& [type, yaml] : std::vector<std::pair<v1::JobType, std::string>>{
           {v1::JOB_TYPE_PACK, "- a list\n"},
           {v1::JOB_TYPE_PACK, "key: [unclosed\n"},
           {v1::JOB_TYPE_PIPELINE, "preset: smoke\nsteps: 3\n"},
           {v1::JOB_TYPE_PIPELINE, "preset: [smoke]\n"},
           {v1::JOB_TYPE_UNSPECIFIED, ""}}) {
    absl::StatusOr<JobPlan> plan = PlanJob(type, yaml, kOutputDir, kAllowedRoots);
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << yaml;
  }
  EXPECT_NE(PlanJob(v1::JOB_TYPE_PIPELINE, "steps: 3\n", kOutputDir, kAllowedRoots)
                .status()
                .message()
                .find("unknown keys: steps"),
            std::string::npos);
}

}  // namespace
}  // namespace specd::trainer
