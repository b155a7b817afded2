// specd's OpenAI-compatible HTTP API as the tools users point at it see it: the `openai` Python
// client, lm-eval (scripts/python-requirements.txt, installed by scripts/setup.sh into
// .cache/python) and curl, against `specd serve --role all --http-port` behind an API key file,
// on loopback.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "tests/interop/chat_model.h"
#include "tests/interop/python_peers.h"
#include "tests/support/paths.h"
#include "tests/support/server_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace specd {
namespace {

using ::specd::testing::CacheDir;
using ::specd::testing::FixtureDir;
using ::specd::testing::ProcessResult;
using ::specd::testing::RunPeerScript;
using ::specd::testing::RunProcess;
using ::specd::testing::ServerProcess;

class OpenAiInteropTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    const std::filesystem::path model = ::specd::testing::WriteChatModel(dir_.path(), error);
    ASSERT_EQ(error, "");
    std::ofstream(dir_.path() / "api-key") << "sesame\n";
    server_ =
        ServerProcess::Start({SPECD_BINARY, "serve", "--role", "all", "--host", "127.0.0.1",
                              "--port", "0", "--http-port", "0", "--model", model.string(),
                              "--drafter", FixtureDir("dflash-tiny-a").string(), "--tokenizer",
                              (CacheDir() / "tokenizer" / "qwen3" / "tokenizer.json").string(),
                              "--api-key-file", (dir_.path() / "api-key").string()},
                             error);
    ASSERT_NE(server_, nullptr) << error;
    ASSERT_GT(server_->http_port(), 0) << server_->log();
  }

  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(server_->http_port()) + path;
  }

  ::specd::testing::TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(OpenAiInteropTest, TheOpenAiClientGetsOpenAisObjectsStreamsAndErrors) {
  const ProcessResult checked = RunPeerScript("openai_client.py", {Url("/v1"), "sesame", "specd"});
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err;
  EXPECT_EQ(checked.out,
            "models lists the served model\n"
            "a completion has its text and usage\n"
            "a completion streamed adds up to the whole\n"
            "a chat reply is the assistant's\n"
            "a chat stream adds up to the whole reply\n"
            "its first delta carries the role\n"
            "its last chunk carries the usage\n"
            "n > 1 is refused\n"
            "another model is not found\n"
            "a wrong key is refused\n");
}

TEST_F(OpenAiInteropTest, LmEvalScoresATaskThroughTheChatApi) {
  const ProcessResult checked = RunPeerScript("lm_eval_client.py", {Url("/v1"), "sesame", "specd"});
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err;
  EXPECT_EQ(checked.out,
            "lm-eval scores every question\n"
            "the replies it scored are specd's\n"
            "its score is their exact-match rate\n");
}

TEST_F(OpenAiInteropTest, CurlStreamsServerSentEventsAndNeedsTheKey) {
  const std::string body =
      R"({"model": "specd", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6,
          "ignore_eos": true, "stream": true})";
  const ProcessResult streamed =
      RunProcess({"curl", "-sS", "-N", "-H", "Authorization: Bearer sesame", "-H",
                  "Content-Type: application/json", "-d", body, Url("/v1/chat/completions")});
  ASSERT_EQ(streamed.exit_code, 0) << streamed.err;
  EXPECT_EQ(streamed.out.rfind("data: {", 0), 0u) << streamed.out;
  EXPECT_NE(streamed.out.find("\"finish_reason\":\"length\""), std::string::npos) << streamed.out;
  EXPECT_TRUE(streamed.out.ends_with("data: [DONE]\n\n")) << streamed.out;

  const ProcessResult refused = RunProcess({"curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                                            "-d", body, Url("/v1/chat/completions")});
  EXPECT_EQ(refused.out, "401") << refused.err;
  const ProcessResult health =
      RunProcess({"curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", Url("/health")});
  EXPECT_EQ(health.out, "200") << health.err;
}

}  // namespace
}  // namespace specd
