// Speculative decoding through the real `specd` binary: `drafter init` writes a random drafter
// for the tiny target, `generate --drafter` gives the ids target-only generation gives plus the
// acceptance statistics, and `bench spec` reports every regime. Outside checks rely on these
// flags and json fields.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "tests/support/paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace specd {
namespace {

using ::specd::testing::ProcessResult;
using ::specd::testing::RunProcess;

constexpr char kPrompt[] = "75,132,14,281,145,235,301,152,73,276";

std::string TinyModel() {
  return (::specd::testing::SharedDir() / "fixtures" / "qwen35-tiny-a").string();
}

ProcessResult Specd(std::vector<std::string> args) {
  args.insert(args.begin(), SPECD_BINARY);
  return RunProcess(args);
}

nlohmann::json GenerateJson(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {
      "generate",         "--model", TinyModel(),    "--ids",    kPrompt,
      "--max-new-tokens", "20",      "--ignore-eos", "--format", "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const ProcessResult run = Specd(args);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  return run.exit_code == 0 ? nlohmann::json::parse(run.out) : nlohmann::json();
}

TEST(SpecdDrafterTest, InitWritesADrafterThatGenerateDecodesWithToTheSameIds) {
  ::specd::testing::TempDir dir;
  const std::string drafter = (dir.path() / "drafter").string();
  const ProcessResult init = Specd({"drafter", "init", "--target", TinyModel(), "--layers", "2",
                                    "--block-size", "8", "--out", drafter, "--seed", "3"});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(drafter) / "model.safetensors"));

  const nlohmann::json alone = GenerateJson({});
  EXPECT_FALSE(alone.contains("acceptance_lengths"));
  EXPECT_FALSE(alone.contains("tau"));
  for (const char* block_size : {"2", "8"}) {
    const nlohmann::json spec =
        GenerateJson({"--drafter", drafter, "--block-size", block_size, "--draft-window", "4"});
    EXPECT_EQ(spec["ids"], alone["ids"]) << "block " << block_size;
    const auto lengths = spec["acceptance_lengths"].get<std::vector<int64_t>>();
    ASSERT_FALSE(lengths.empty());
    // The first token comes from the prefill, every other one from a verify step.
    EXPECT_EQ(std::accumulate(lengths.begin(), lengths.end(), int64_t{1}), 20);
    EXPECT_GE(spec["tau"].get<double>(), 1.0);
  }
}

TEST(SpecdDrafterTest, TheOracleDrafterIsAcceptedWholeBlocks) {
  // Unguarded: the guard would find the oracle (three target forwards a block) not worth it.
  const nlohmann::json spec =
      GenerateJson({"--drafter", "oracle", "--block-size", "4", "--no-speculation-guard"});
  EXPECT_EQ(spec["ids"], GenerateJson({})["ids"]);
  EXPECT_EQ(spec["acceptance_lengths"], nlohmann::json({4, 4, 4, 4, 3}));
  EXPECT_DOUBLE_EQ(spec["tau"].get<double>(), 3.8);
}

TEST(SpecdDrafterTest, RefusesDraftFlagsWithoutADrafterAndAMaskOutsideTheVocabulary) {
  const ProcessResult flags = Specd({"generate", "--model", TinyModel(), "--ids", kPrompt,
                                     "--max-new-tokens", "4", "--block-size", "4"});
  EXPECT_NE(flags.exit_code, 0);
  ::specd::testing::TempDir dir;
  const ProcessResult mask =
      Specd({"drafter", "init", "--target", TinyModel(), "--layers", "1", "--block-size", "4",
             "--out", dir.path().string(), "--mask-token-id", "320"});
  EXPECT_EQ(mask.exit_code, 1);
  EXPECT_NE(mask.err.find("outside the target's vocabulary of 320"), std::string::npos) << mask.err;
}

TEST(SpecdBenchSpecTest, ReportsEveryRegimeWithAndWithoutTheDrafter) {
  const ProcessResult run =
      Specd({"bench", "spec", "--model", TinyModel(), "--drafter", "oracle", "--block-size", "4",
             "--prompt-lens", "8,16,32", "--new-tokens", "9,9,9", "--repeats", "1"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  for (const char* expected : {"short", "medium", "long", "target", "tau  4.00", "speedup", "draft",
                               "verify", "same ids"}) {
    EXPECT_NE(run.out.find(expected), std::string::npos) << expected << " in\n" << run.out;
  }
}

}  // namespace
}  // namespace specd
