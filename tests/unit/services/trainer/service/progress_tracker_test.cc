// ProgressTracker: what each kind of progress line sets, throughput from metrics.jsonl, pipeline
// stages, and the newest checkpoint.
#include "services/trainer/service/progress_tracker.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/support/temp_dir.h"

namespace specd::trainer {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1700000000);

class ProgressTrackerTest : public ::testing::Test {
 protected:
  void AppendMetrics(const std::filesystem::path& run, const std::string& lines) {
    std::filesystem::create_directories(run);
    std::ofstream(run / "metrics.jsonl", std::ios::app) << lines;
  }
  specd::testing::TempDir dir_;
};

TEST_F(ProgressTrackerTest, AStepLineSetsStepTotalLossAndEta) {
  ProgressTracker tracker(v1::JOB_TYPE_PRETRAIN, dir_.path(), {});
  EXPECT_TRUE(
      tracker.OnLine("pretrain: step 12/600 loss 4.1234 lr 3.00e-03 5s elapsed, ETA 2m03s", kNow));
  const v1::JobProgress& progress = tracker.progress();
  EXPECT_EQ(progress.step(), 12u);
  EXPECT_EQ(progress.total_steps(), 600u);
  EXPECT_DOUBLE_EQ(progress.loss(), 4.1234);
  EXPECT_EQ(progress.estimated_time_remaining().seconds(), 123);
  EXPECT_EQ(progress.stage(), v1::JOB_TYPE_PRETRAIN);
  EXPECT_EQ(progress.update_time().seconds(), 1700000000);
  EXPECT_FALSE(progress.has_validation_loss());
}

TEST_F(ProgressTrackerTest, ValidationAndResumeLinesSetTheirFields) {
  ProgressTracker tracker(v1::JOB_TYPE_QAD, dir_.path(), {});
  EXPECT_TRUE(tracker.OnLine("qad: resuming after step 200 of 8000", kNow));
  EXPECT_EQ(tracker.progress().step(), 200u);
  EXPECT_EQ(tracker.progress().total_steps(), 8000u);
  EXPECT_TRUE(tracker.OnLine("qad: step 400 validation loss 0.01234", kNow));
  EXPECT_EQ(tracker.progress().step(), 400u);
  EXPECT_DOUBLE_EQ(tracker.progress().validation_loss(), 0.01234);
}

TEST_F(ProgressTrackerTest, CountersOfTheOtherStagesAreSteps) {
  ProgressTracker tracker(v1::JOB_TYPE_REGENERATE, "", {});
  for (const auto& [line, step, total] : std::vector<std::tuple<std::string, uint64_t, uint64_t>>{
           {"regenerate: 16/96 conversations", 16, 96},
           {"gptq drafter: calibrated 3/16 sequences", 3, 16},
           {"awq search [2/8]", 2, 8},
           {"[7/40] int4 model.layers.0.mlp.up_proj.weight", 7, 40}}) {
    EXPECT_TRUE(tracker.OnLine(line, kNow)) << line;
    EXPECT_EQ(tracker.progress().step(), step) << line;
    EXPECT_EQ(tracker.progress().total_steps(), total) << line;
  }
}

TEST_F(ProgressTrackerTest, OtherLinesChangeNothing) {
  ProgressTracker tracker(v1::JOB_TYPE_PACK, dir_.path(), {});
  EXPECT_FALSE(tracker.OnLine("{\"validation_loss\": 2.1, \"checkpoint\": \"x\"}", kNow));
  EXPECT_FALSE(tracker.OnLine("== pipeline: pretrain", kNow));  // not a pipeline job
  EXPECT_EQ(tracker.progress().stage(), v1::JOB_TYPE_PACK);
  EXPECT_FALSE(tracker.progress().has_update_time());
}

TEST_F(ProgressTrackerTest, ThroughputIsTheNewestStepsTokensOverItsInterval) {
  AppendMetrics(dir_.path(),
                "{\"step\":1,\"loss\":5,\"tokens\":100,\"seconds\":0.5}\n"
                "{\"step\":1,\"validation\":{\"loss\":4}}\n"
                "{\"step\":2,\"loss\":4,\"tokens\":300,\"seconds\":1.5}\n");
  ProgressTracker tracker(v1::JOB_TYPE_PRETRAIN, dir_.path(), {});
  tracker.OnLine("pretrain: step 2/10 loss 4.0000 lr 1.00e-03 1s elapsed, ETA 4s", kNow);
  EXPECT_DOUBLE_EQ(tracker.progress().tokens_per_second(), 300.0);
  // A resumed process counts its seconds from zero again.
  AppendMetrics(dir_.path(), "{\"step\":3,\"loss\":3,\"tokens\":200,\"seconds\":0.25}\n");
  tracker.OnLine("pretrain: step 3/10 loss 3.0000 lr 1.00e-03 0s elapsed, ETA 2s", kNow);
  EXPECT_DOUBLE_EQ(tracker.progress().tokens_per_second(), 800.0);
}

TEST_F(ProgressTrackerTest, APipelineReportsTheStageItRunsAndThatStagesNumbers) {
  ProgressTracker tracker(v1::JOB_TYPE_PIPELINE, dir_.path(), {});
  EXPECT_EQ(tracker.progress().stage(), v1::JOB_TYPE_PIPELINE);
  tracker.OnLine("== pipeline: pretrain", kNow);
  EXPECT_EQ(tracker.progress().stage(), v1::JOB_TYPE_PRETRAIN);
  AppendMetrics(dir_.path() / "teacher", "{\"step\":1,\"loss\":5,\"tokens\":64,\"seconds\":0.5}\n");
  tracker.OnLine("pretrain: step 1/600 loss 5.0000 lr 1.00e-03 0s elapsed, ETA 5m00s", kNow);
  EXPECT_DOUBLE_EQ(tracker.progress().tokens_per_second(), 128.0);
  tracker.OnLine("== pipeline: regenerate (QAD target)", kNow);
  EXPECT_EQ(tracker.progress().stage(), v1::JOB_TYPE_REGENERATE);
  EXPECT_EQ(tracker.progress().step(), 0u);
  EXPECT_FALSE(tracker.progress().has_loss());
  tracker.OnLine("== pipeline: drafter stage 2", kNow);
  EXPECT_EQ(tracker.progress().stage(), v1::JOB_TYPE_DRAFTER_STAGE2);
}

TEST_F(ProgressTrackerTest, TheLastCheckpointIsTheRunsStateOnceItHasProgress) {
  ProgressTracker tracker(v1::JOB_TYPE_PRETRAIN, dir_.path(), {});
  EXPECT_EQ(tracker.LastCheckpoint("before"), "before");
  std::filesystem::create_directories(dir_.path() / "state");
  EXPECT_EQ(tracker.LastCheckpoint(""), "");  // a state being written has no progress.json yet
  std::ofstream(dir_.path() / "state" / "progress.json") << "{\"step\": 5}";
  EXPECT_EQ(tracker.LastCheckpoint(""), (dir_.path() / "state").string());
}

}  // namespace
}  // namespace specd::trainer
