// `specd generate` and `specd bench` run as real processes: the flags and the json that outside
// checks rely on, and the errors a user sees.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/io/safetensors_file.h"
#include "tests/support/paths.h"
#include "tests/support/subprocess.h"

namespace specd {
namespace {

using ::specd::testing::ProcessResult;
using ::specd::testing::RunProcess;

std::string TinyModel() {
  return (::specd::testing::SharedDir() / "fixtures" / "qwen35-tiny-a").string();
}

ProcessResult Specd(std::vector<std::string> args) {
  args.insert(args.begin(), SPECD_BINARY);
  return RunProcess(args);
}

std::vector<int64_t> ReferenceIds(const std::string& name) {
  absl::StatusOr<io::SafetensorsFile> reference =
      io::SafetensorsFile::Open(std::filesystem::path(TinyModel()) / "reference.safetensors");
  EXPECT_TRUE(reference.ok()) << reference.status();
  if (!reference.ok()) return {};
  const io::TensorView* view = reference->Find(name);
  EXPECT_NE(view, nullptr) << name;
  if (view == nullptr) return {};
  const auto* ids = reinterpret_cast<const int64_t*>(view->bytes.data());
  return {ids, ids + view->bytes.size() / sizeof(int64_t)};
}

// The reference's greedy continuation follows the first 40 of its input ids.
std::string ReferencePrompt() {
  std::string list;
  const std::vector<int64_t> ids = ReferenceIds("input_ids");
  for (size_t i = 0; i < 40; ++i) {
    if (i > 0) list += ',';
    list += std::to_string(ids[i]);
  }
  return list;
}

TEST(SpecdGenerateTest, GreedyIdsReproduceTheReferenceContinuation) {
  const ProcessResult run = Specd({"generate", "--model", TinyModel(), "--ids", ReferencePrompt(),
                                   "--max-new-tokens", "24", "--ignore-eos", "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json out = nlohmann::json::parse(run.out);
  EXPECT_EQ(out["ids"].get<std::vector<int64_t>>(), ReferenceIds("greedy_ids"));
}

TEST(SpecdGenerateTest, JsonHasTheNewIdsTheirTextAndTimings) {
  const ProcessResult run =
      Specd({"generate", "--model", TinyModel(), "--ids", "1,2,3", "--max-new-tokens", "5",
             "--temperature", "0.8", "--top-p", "0.9", "--top-k", "50", "--seed", "3",
             "--ignore-eos", "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json out = nlohmann::json::parse(run.out);
  EXPECT_EQ(out["ids"].size(), 5u);
  EXPECT_TRUE(out.contains("text"));  // a string with a tokenizer at hand, null without
  for (const char* timing : {"prefill_ms", "decode_ms_per_token", "total_ms", "tokens_per_s"}) {
    EXPECT_GT(out["timings"][timing].get<double>(), 0) << timing;
  }
}

TEST(SpecdGenerateTest, RefusesIdsOutsideTheModelsVocabulary) {
  const ProcessResult run =
      Specd({"generate", "--model", TinyModel(), "--ids", "1,320", "--max-new-tokens", "4"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("outside the model's vocabulary of 320"), std::string::npos) << run.err;
}

TEST(SpecdGenerateTest, RefusesBadFlags) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--ids", "1,x", "--max-new-tokens", "4"},
           {"--max-new-tokens", "4"},
           {"--ids", "1", "--prompt", "hi", "--max-new-tokens", "4"},
           {"--ids", "1", "--max-new-tokens", "0"},
           {"--ids", "1", "--max-new-tokens", "4", "--format", "xml"}}) {
    std::vector<std::string> command = {"generate", "--model", TinyModel()};
    command.insert(command.end(), args.begin(), args.end());
    const ProcessResult run = Specd(command);
    EXPECT_NE(run.exit_code, 0) << args[0] << " " << args[1];
    EXPECT_FALSE(run.err.empty());
  }
}

TEST(SpecdBenchTest, InitModelWritesACheckpointThatGenerates) {
  const std::filesystem::path out = std::filesystem::temp_directory_path() / "specd_init_model";
  std::filesystem::remove_all(out);
  const std::string config = TinyModel() + "/config.json";
  const ProcessResult init =
      Specd({"bench", "init-model", "--config", config, "--out", out.string(), "--dtype", "bf16"});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  const ProcessResult run = Specd({"generate", "--model", out.string(), "--ids", "1,2,3",
                                   "--max-new-tokens", "3", "--ignore-eos", "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(nlohmann::json::parse(run.out)["ids"].size(), 3u);
  std::filesystem::remove_all(out);
}

TEST(SpecdBenchTest, InitModelRefusesAnUnknownPreset) {
  const ProcessResult run =
      Specd({"bench", "init-model", "--preset", "qwen35-70b", "--out", "/tmp/unused"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("qwen35-0.8b"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace specd
