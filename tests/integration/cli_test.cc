// The `specd` command line, run as a real process: what a user types and what outside checks
// rely on (flags, output formats, exit codes).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/paths.h"
#include "tests/support/subprocess.h"

namespace specd {
namespace {

using ::specd::testing::ProcessResult;
using ::specd::testing::RunProcess;

std::string TokenizerPath() {
  return (::specd::testing::CacheDir() / "tokenizer/qwen3/tokenizer.json").string();
}

std::string FixtureDir(const std::string& name) {
  return (::specd::testing::SharedDir() / "fixtures" / name).string();
}

ProcessResult Specd(std::vector<std::string> args, const std::string& stdin_text = "") {
  args.insert(args.begin(), SPECD_BINARY);
  return RunProcess(args, stdin_text);
}

// A few reference cases that cross the command line differently (ASCII, CJK, emoji with ZWJ,
// special tokens and newlines); the library tests cover every case.
std::vector<nlohmann::json> ReferenceCases() {
  std::ifstream file(::specd::testing::SharedDir() / "reference/tokenizer/qwen3_cases.json");
  const nlohmann::json all = nlohmann::json::parse(file);
  std::vector<nlohmann::json> chosen;
  for (const nlohmann::json& c : all) {
    const std::string text = c["text"];
    for (const char* marker : {"Hello, world!", "你好", "👨", "<|im_start|>"}) {
      if (text.find(marker) != std::string::npos) chosen.push_back(c);
    }
  }
  return chosen;
}

TEST(SpecdTokenizeTest, PrintsTheReferenceIdsAsJson) {
  ASSERT_EQ(ReferenceCases().size(), 4u);
  for (const nlohmann::json& c : ReferenceCases()) {
    const std::string text = c["text"];
    const ProcessResult run =
        Specd({"tokenize", "--tokenizer", TokenizerPath(), "--text", text, "--format", "json"});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(nlohmann::json::parse(run.out)["ids"], c["ids"]) << text;
  }
}

TEST(SpecdTokenizeTest, ReadsStandardInputAndPrintsPlainIds) {
  const ProcessResult run =
      Specd({"tokenize", "--tokenizer", TokenizerPath(), "--input", "-", "--format", "text"},
            "Hello, world!");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "9707 11 1879 0\n");
}

TEST(SpecdDetokenizeTest, TurnsReferenceIdsBackIntoTheirText) {
  for (const nlohmann::json& c : ReferenceCases()) {
    std::string ids;
    for (const nlohmann::json& id : c["ids"]) {
      if (!ids.empty()) ids += ',';
      ids += std::to_string(id.get<int>());
    }
    if (ids.empty()) continue;  // nothing to detokenize
    const ProcessResult run = Specd({"detokenize", "--tokenizer", TokenizerPath(), "--ids", ids});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(run.out, c["decoded"].get<std::string>() + "\n") << ids;
  }
}

TEST(SpecdTokenizeTest, MissingTokenizerFileIsAClearErrorWithExitCode1) {
  const ProcessResult run =
      Specd({"tokenize", "--tokenizer", "/nonexistent/tokenizer.json", "--text", "hi"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("/nonexistent/tokenizer.json"), std::string::npos) << run.err;
  EXPECT_TRUE(run.out.empty());
}

TEST(SpecdDetokenizeTest, RejectsIdsThatAreNotNumbersOrOutsideTheVocabulary) {
  for (const char* ids : {"12,abc", "99999999"}) {
    const ProcessResult run = Specd({"detokenize", "--tokenizer", TokenizerPath(), "--ids", ids});
    EXPECT_EQ(run.exit_code, 1) << ids;
    EXPECT_NE(run.err.find("specd detokenize:"), std::string::npos) << run.err;
  }
}

TEST(SpecdInspectTest, SummarisesTheDenseTheW4A16AndTheDrafterFixtures) {
  const ProcessResult dense = Specd({"inspect", FixtureDir("qwen35-tiny-a"), "--format", "json"});
  ASSERT_EQ(dense.exit_code, 0) << dense.err;
  const nlohmann::json d = nlohmann::json::parse(dense.out);
  EXPECT_EQ(d["architecture"], "Qwen3_5ForCausalLM");
  EXPECT_EQ(d["num_layers"], 4);
  EXPECT_EQ(d["layer_types"]["linear_attention"], 3);
  EXPECT_EQ(d["quantization"], nullptr);

  const ProcessResult w4a16 =
      Specd({"inspect", FixtureDir("qwen35-tiny-a-w4a16"), "--format", "json"});
  ASSERT_EQ(w4a16.exit_code, 0) << w4a16.err;
  const nlohmann::json q = nlohmann::json::parse(w4a16.out);
  EXPECT_EQ(q["tensors"]["by_dtype"]["I32"]["tensor_count"],
            25);  // one weight_packed per quantized linear
  EXPECT_NE(q["quantization"], nullptr);

  const ProcessResult drafter = Specd({"inspect", FixtureDir("dflash-tiny-a")});
  ASSERT_EQ(drafter.exit_code, 0) << drafter.err;
  EXPECT_NE(drafter.out.find("DFlashDraftModel"), std::string::npos) << drafter.out;
}

TEST(SpecdInspectTest, TruncatedCheckpointIsAClearErrorWithExitCode1) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "specd_cli_test_truncated";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(FixtureDir("qwen35-tiny-a") + "/config.json", dir / "config.json");
  {
    std::ifstream whole(FixtureDir("qwen35-tiny-a") + "/model.safetensors", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(whole)), std::istreambuf_iterator<char>());
    std::ofstream(dir / "model.safetensors", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  const ProcessResult run = Specd({"inspect", dir.string()});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("model.safetensors"), std::string::npos) << run.err;
  std::filesystem::remove_all(dir);
}

// Debian's OpenBLAS falls back to its SSE3 kernels on CPUs newer than itself; specd then runs
// itself again on the widest ones the CPU has (cli/specd/blas_kernels.h). OPENBLAS_VERBOSE=2 has
// OpenBLAS name the kernels as it loads: the last it names are the ones the command ran on.
TEST(SpecdTest, FloatProductsRunOnTheWidestBlasKernelsTheCpuHas) {
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "this CPU has nothing wider than SSE3";
  unsetenv("OPENBLAS_CORETYPE");
  setenv("OPENBLAS_VERBOSE", "2", 1);
  const ProcessResult run = Specd({"--version"});
  unsetenv("OPENBLAS_VERBOSE");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const size_t named = run.err.rfind("Core: ");
  if (named == std::string::npos) GTEST_SKIP() << "LibTorch's BLAS here is not OpenBLAS";
  EXPECT_NE(run.err.substr(named), "Core: Prescott\n") << run.err;
}

TEST(SpecdTest, UnknownSubcommandIsAUsageError) {
  const ProcessResult run = Specd({"no-such-command"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_FALSE(run.err.empty());
}

}  // namespace
}  // namespace specd
