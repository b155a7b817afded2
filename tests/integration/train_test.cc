// `specd pipeline --preset smoke` end to end as a real process (what CI runs of training): the
// report exists and names the pinned corpus, QAD lowers KL(teacher ‖ INT4), and the trained
// drafter, drafting with the window it was trained for, is accepted for several tokens a step.
// And `specd train` refuses a config with a key it does not know.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace specd {
namespace {

using ::specd::testing::ProcessResult;
using ::specd::testing::RunProcess;

ProcessResult Specd(std::vector<std::string> args) {
  args.insert(args.begin(), SPECD_BINARY);
  return RunProcess(args);
}

TEST(SpecdPipelineTest, SmokePresetTrainsAPairThatQadAndDraftingImprove) {
  specd::testing::TempDir dir;
  const ProcessResult run = Specd({"pipeline", "--preset", "smoke", "--out", dir.path().string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::ifstream file(dir.path() / "report.json");
  const nlohmann::json report = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(report.is_discarded());
  for (const char* key :
       {"teacher_val_loss", "kl_before_qad", "kl_after_qad", "tau_stage1", "tau_stage2", "tau_gptq",
        "tau_long_full", "tau_long_swa", "tokens_per_s_plain", "tokens_per_s_spec"}) {
    EXPECT_TRUE(report.contains(key) && report[key].is_number()) << key;
  }
  EXPECT_LT(report["kl_after_qad"].get<double>(), report["kl_before_qad"].get<double>());
  EXPECT_EQ(report["corpus"]["sha256"].get<std::string>().size(), 64);
  // τ 6.06 on the machine of record; 1.5 to 1.8 before drafters drafted with their window.
  EXPECT_GT(report["tau_stage2"].get<double>(), 3);
  EXPECT_GT(report["tau_gptq"].get<double>(), 3);
  EXPECT_GT(report["tau_long_swa"].get<double>(), report["tau_long_full"].get<double>());
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "report.md"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "plots" / "acceptance.png"));

  // The pair it made serves: the QAD target with the GPTQ drafter, lossless.
  const std::string ids = "257,117,115,101,114,10,100,101,102,32";
  const ProcessResult plain =
      Specd({"generate", "--model", (dir.path() / "qad" / "best").string(), "--ids", ids,
             "--max-new-tokens", "24", "--ignore-eos", "--format", "json"});
  const ProcessResult speculative =
      Specd({"generate", "--model", (dir.path() / "qad" / "best").string(), "--ids", ids,
             "--max-new-tokens", "24", "--ignore-eos", "--format", "json", "--drafter",
             (dir.path() / "drafter-gptq").string()});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(speculative.exit_code, 0) << speculative.err;
  EXPECT_EQ(nlohmann::json::parse(plain.out)["ids"], nlohmann::json::parse(speculative.out)["ids"]);
}

TEST(SpecdTrainTest, AConfigKeyNoStageReadsIsAnError) {
  specd::testing::TempDir dir;
  std::ofstream(dir.path() / "qad.yaml")
      << "teacher: t\nstudent: s\ndata: d\nout: o\nlearning_rate: 1e-5\n";
  const ProcessResult run = Specd({"train", "qad", "--config", (dir.path() / "qad.yaml").string()});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("unknown keys: learning_rate"), std::string::npos) << run.err;
}

TEST(SpecdTrainTest, EveryExampleConfigIsValidForItsStage) {
  const std::filesystem::path configs = ::specd::testing::SourceDir() / "configs" / "train";
  for (const char* stage : {"pack", "regenerate", "pretrain", "quantize", "qad", "drafter-stage1",
                            "drafter-stage2", "gptq-drafter"}) {
    const std::string name = stage;
    const ProcessResult run =
        Specd({"train", name.starts_with("drafter") ? "drafter" : name, "--config",
               (configs / (name + ".yaml")).string(), "--dry-run"});
    EXPECT_EQ(run.exit_code, 0) << stage << ": " << run.err;
  }
}

TEST(SpecdTrainTest, AnUnknownStageIsAnErrorListingTheStages) {
  specd::testing::TempDir dir;
  std::ofstream(dir.path() / "x.yaml") << "{}\n";
  const ProcessResult run =
      Specd({"train", "distill", "--config", (dir.path() / "x.yaml").string()});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("gptq-drafter"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace specd
