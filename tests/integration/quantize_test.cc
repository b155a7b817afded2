// `specd quantize` and `specd bench init-model --quantize` as real processes: the checkpoints they
// write run in `specd forward` and `specd bench decode`.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/io/safetensors_file.h"
#include "tests/support/paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/common/text/tiny_tokenizer_json.h"

namespace specd {
namespace {

using ::specd::testing::ProcessResult;
using ::specd::testing::RunProcess;

std::filesystem::path TinyModel() {
  return ::specd::testing::SharedDir() / "fixtures" / "qwen35-tiny-a";
}

ProcessResult Specd(std::vector<std::string> args) {
  args.insert(args.begin(), SPECD_BINARY);
  return RunProcess(args);
}

nlohmann::json ReadJson(const std::filesystem::path& path) {
  std::ifstream file(path);
  return nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Runs `specd forward` on `model` and returns the logits' shape, or {} if it failed.
std::vector<int64_t> ForwardLogitsShape(const std::filesystem::path& model,
                                        const std::filesystem::path& out) {
  const ProcessResult run = Specd(
      {"forward", "--model", model.string(), "--ids", "3,14,15,92,65", "--out", out.string()});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  absl::StatusOr<io::SafetensorsFile> logits = io::SafetensorsFile::Open(out);
  if (run.exit_code != 0 || !logits.ok() || logits->Find("logits") == nullptr) return {};
  return logits->Find("logits")->shape;
}

TEST(SpecdQuantizeTest, RtnCheckpointRunsInSpecdForward) {
  specd::testing::TempDir dir;
  const auto out = dir.path() / "rtn";
  const ProcessResult run = Specd({"quantize", "--model", TinyModel().string(), "--method", "rtn",
                                   "--group-size", "32", "--out", out.string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(Contains(run.err, "[1/55] ")) << run.err;
  EXPECT_TRUE(Contains(run.err, "[55/55] copy model.norm.weight")) << run.err;
  EXPECT_TRUE(Contains(run.err, "int4 model.layers.0.mlp.down_proj.weight")) << run.err;
  EXPECT_TRUE(Contains(run.out, "25 of 55 tensors quantized (W4A16 rtn, group 32, symmetric)"))
      << run.out;

  const nlohmann::json config = ReadJson(out / "config.json");
  const nlohmann::json& weights =
      config["quantization_config"]["config_groups"]["group_0"]["weights"];
  EXPECT_EQ(weights["group_size"], 32);
  EXPECT_EQ(weights["symmetric"], true);
  EXPECT_EQ(ForwardLogitsShape(out, dir.path() / "logits.safetensors"),
            (std::vector<int64_t>{5, 320}));
}

TEST(SpecdQuantizeTest, AsymmetricChannelWiseWithItsOwnIgnoreList) {
  specd::testing::TempDir dir;
  const auto out = dir.path() / "asym";
  const ProcessResult run =
      Specd({"quantize", "--model", TinyModel().string(), "--group-size", "0", "--asymmetric",
             "--ignore", "re:.*in_proj_a$", "--ignore", "re:.*in_proj_b$", "--ignore",
             "model.layers.3.self_attn.o_proj", "--out", out.string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(Contains(run.err, "copy model.layers.3.self_attn.o_proj.weight")) << run.err;
  const nlohmann::json config = ReadJson(out / "config.json");
  const nlohmann::json& block = config["quantization_config"];
  EXPECT_EQ(block["config_groups"]["group_0"]["weights"]["strategy"], "channel");
  EXPECT_EQ(block["config_groups"]["group_0"]["weights"]["symmetric"], false);
  EXPECT_EQ(block["ignore"], nlohmann::json::array({"re:.*in_proj_a$", "re:.*in_proj_b$",
                                                    "model.layers.3.self_attn.o_proj"}));
  EXPECT_EQ(ForwardLogitsShape(out, dir.path() / "logits.safetensors"),
            (std::vector<int64_t>{5, 320}));
}

TEST(SpecdQuantizeTest, AwqCalibratesOnATextFileThenQuantizes) {
  specd::testing::TempDir dir;
  const auto model = dir.path() / "model";  // the fixture with a tokenizer of 259 ids beside it
  std::filesystem::create_directories(model);
  for (const char* file : {"config.json", "model.safetensors"}) {
    std::filesystem::copy_file(TinyModel() / file, model / file);
  }
  std::ofstream(model / "tokenizer.json") << text::TinyTokenizerJson().dump();
  std::ofstream(dir.path() / "calib.txt")
      << "abc bca cab, the quick brown fox jumps over the lazy dog. " << std::string(400, 'a');
  const auto out = dir.path() / "awq";
  const ProcessResult run =
      Specd({"quantize", "--model", model.string(), "--method", "awq", "--group-size", "32",
             "--calib", (dir.path() / "calib.txt").string(), "--calib-samples", "4",
             "--calib-seq-len", "32", "--out", out.string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(Contains(run.err, "awq search [")) << run.err;
  EXPECT_TRUE(Contains(run.out, "W4A16 awq, group 32")) << run.out;
  EXPECT_TRUE(std::filesystem::exists(out / "tokenizer.json"));
  EXPECT_EQ(ForwardLogitsShape(out, dir.path() / "logits.safetensors"),
            (std::vector<int64_t>{5, 320}));
}

TEST(SpecdQuantizeTest, ErrorsAreClearWithExitCode1) {
  specd::testing::TempDir dir;
  const auto out = (dir.path() / "out").string();
  const std::string model = TinyModel().string();
  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--group-size", "48"},
            "group size 48 does not divide the 64 input columns of "
            "model.layers.0.linear_attn.in_proj_qkv"},
           {{"--method", "awq"}, "--method awq needs --calib FILE"},
           {{"--calib", "calib.txt"}, "--calib is for --method awq"}}) {
    std::vector<std::string> command = {"quantize", "--model", model, "--out", out};
    command.insert(command.end(), args.begin(), args.end());
    const ProcessResult run = Specd(command);
    EXPECT_EQ(run.exit_code, 1) << message;
    EXPECT_TRUE(Contains(run.err, "specd quantize: " + message)) << run.err;
  }
  const ProcessResult quantized =
      Specd({"quantize", "--model",
             (::specd::testing::SharedDir() / "fixtures" / "qwen35-tiny-a-w4a16").string(), "--out",
             out});
  EXPECT_EQ(quantized.exit_code, 1);
  EXPECT_TRUE(Contains(quantized.err, "already has a quantization_config")) << quantized.err;
}

TEST(SpecdBenchInitModelTest, QuantizedRandomModelIsWrittenW4A16AndDecodes) {
  specd::testing::TempDir dir;
  const auto out = dir.path() / "random";
  const ProcessResult init =
      Specd({"bench", "init-model", "--config", (TinyModel() / "config.json").string(),
             "--quantize", "rtn", "--group-size", "32", "--out", out.string()});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  const nlohmann::json config = ReadJson(out / "config.json");
  EXPECT_EQ(config["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"], 32);
  absl::StatusOr<io::SafetensorsFile> weights =
      io::SafetensorsFile::Open(out / "model.safetensors");
  ASSERT_TRUE(weights.ok()) << weights.status();
  EXPECT_NE(weights->Find("model.layers.0.mlp.up_proj.weight_packed"), nullptr);
  EXPECT_EQ(weights->Find("model.layers.0.mlp.up_proj.weight"), nullptr);
  EXPECT_NE(weights->Find("model.layers.0.linear_attn.in_proj_a.weight"), nullptr);

  const ProcessResult decode = Specd({"bench", "decode", "--model", out.string(), "--prompt-len",
                                      "8", "--tokens", "2", "--copy-mib", "16"});
  ASSERT_EQ(decode.exit_code, 0) << decode.err;
  EXPECT_TRUE(Contains(decode.out, "resident ")) << decode.out;
  EXPECT_TRUE(Contains(decode.out, "MiB INT4 (codes, scales, zero points as the kernels hold them)")) << decode.out;
}

}  // namespace
}  // namespace specd
