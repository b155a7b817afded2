// PlanJob: which `specd` command a job type runs and what config.yaml its output directory gets.
#include "services/trainer/service/job_plan.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

namespace specd::trainer {
namespace {

const std::filesystem::path kOutputDir = "/work/jobs/job-1";

JobPlan Plan(v1::JobType type, const std::string& yaml) {
  absl::StatusOr<JobPlan> plan = PlanJob(type, yaml, kOutputDir);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : JobPlan{};
}

std::string Value(const std::string& yaml, const std::string& key) {
  return YAML::Load(yaml)[key].as<std::string>();
}

TEST(PlanJob, AStageRunsSpecdTrainOnTheConfigInTheOutputDirectory) {
  const JobPlan plan = Plan(v1::JOB_TYPE_PRETRAIN, "steps: 10\n");
  EXPECT_EQ(plan.stage, "pretrain");
  EXPECT_EQ(plan.config_file(), kOutputDir / "config.yaml");
  EXPECT_EQ(
      plan.Arguments(plan.config_file(), false),
      (std::vector<std::string>{"train", "pretrain", "--config", "/work/jobs/job-1/config.yaml"}));
  EXPECT_EQ(
      plan.Arguments("/tmp/x.yaml", true),
      (std::vector<std::string>{"train", "pretrain", "--config", "/tmp/x.yaml", "--dry-run"}));
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
    absl::StatusOr<JobPlan> plan = PlanJob(type, yaml, kOutputDir);
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << yaml;
  }
  EXPECT_NE(PlanJob(v1::JOB_TYPE_PIPELINE, "steps: 3\n", kOutputDir)
                .status()
                .message()
                .find("unknown keys: steps"),
            std::string::npos);
}

}  // namespace
}  // namespace specd::trainer
