// specd's gRPC API as its own Python client sees it: specd_client (clients/python, its stubs
// generated from protos/ when scripts/setup.sh installs it into .cache/python) against `specd
// serve --role all` behind an API key, and a trainer behind an API key and mutual TLS, on loopback.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tests/interop/chat_model.h"
#include "tests/interop/python_peers.h"
#include "tests/support/paths.h"
#include "tests/support/server_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_certificates.h"

namespace specd {
namespace {

using ::specd::testing::CacheDir;
using ::specd::testing::FixtureDir;
using ::specd::testing::ProcessResult;
using ::specd::testing::RunPeerScript;
using ::specd::testing::RunProcess;
using ::specd::testing::ServerProcess;

// Absolute: a job's config resolves relative paths against its output directory.
std::filesystem::path TokenizerFile() {
  return std::filesystem::absolute(CacheDir() / "tokenizer" / "qwen3" / "tokenizer.json");
}

class PythonClientInteropTest : public ::testing::Test {
 protected:
  void SetUp() override { std::ofstream(dir_.path() / "api-key") << "sesame\n"; }

  std::unique_ptr<ServerProcess> Serve(std::vector<std::string> args) {
    std::vector<std::string> argv = {
        SPECD_BINARY, "serve", "--host",         "127.0.0.1",
        "--port",     "0",     "--api-key-file", (dir_.path() / "api-key").string()};
    argv.insert(argv.end(), args.begin(), args.end());
    std::string error;
    std::unique_ptr<ServerProcess> server = ServerProcess::Start(argv, error);
    EXPECT_NE(server, nullptr) << error;
    return server;
  }

  ::specd::testing::TempDir dir_;
};

TEST_F(PythonClientInteropTest, GeneratesStreamsAbortsAndRaisesTheServersStatus) {
  std::string error;
  const std::filesystem::path model = ::specd::testing::WriteChatModel(dir_.path(), error);
  ASSERT_EQ(error, "");
  const std::unique_ptr<ServerProcess> server =
      Serve({"--role", "all", "--model", model.string(), "--drafter",
             FixtureDir("dflash-tiny-a").string(), "--tokenizer", TokenizerFile().string()});
  ASSERT_NE(server, nullptr);

  const ProcessResult checked =
      RunPeerScript("python_client.py", {"generation", server->address(), "sesame"});
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err;
  EXPECT_EQ(checked.out,
            "model info describes the served model\n"
            "generate returns ids, text and usage\n"
            "a greedy stream adds up to generate\n"
            "only its last message finishes\n"
            "drafted steps are counted\n"
            "a conversation and token ids are prompts too\n"
            "abort stops a request in flight\n"
            "aborting it again finds nothing\n"
            "a bad argument raises INVALID_ARGUMENT naming it\n"
            "a wrong key raises UNAUTHENTICATED\n"
            "the key defaults to SPECD_API_KEY\n");
}

TEST_F(PythonClientInteropTest, SubmitsListsFollowsAndCancelsJobsOverMutualTls) {
  // A pack job: a few texts into sequences, done in seconds.
  const std::filesystem::path data = dir_.path() / "data";
  std::filesystem::create_directories(data);
  std::ofstream texts(data / "texts.jsonl");
  for (int i = 0; i < 32; ++i) {
    texts << "{\"text\": \"Document " << i << ": the quick brown fox jumps over the lazy dog.\"}\n";
  }
  texts.close();
  std::ofstream(data / "pack.yaml")
      << "input: " << (data / "texts.jsonl").string() << "\ntokenizer: " << TokenizerFile().string()
      << "\nsequence_length: 32\nvalidation_fraction: 0.1\n";
  // Named as a Service, not by address: the client checks it against tls_server_name.
  const ::specd::testing::TestCertificates tls =
      ::specd::testing::MakeTestCertificates(dir_.path(), "DNS:specd-trainer");
  const std::unique_ptr<ServerProcess> trainer =
      Serve({"--role", "trainer", "--work-root", (dir_.path() / "work").string(), "--allowed-root",
             data.string(), "--allowed-root", TokenizerFile().parent_path().string(), "--tls-cert",
             tls.cert.string(), "--tls-key", tls.key.string(), "--tls-client-ca", tls.ca.string()});
  ASSERT_NE(trainer, nullptr);

  const ProcessResult checked = RunPeerScript(
      "python_client.py", {"jobs", trainer->address(), "sesame", (data / "pack.yaml").string(),
                           tls.ca.string(), tls.cert.string(), tls.key.string(), "specd-trainer"});
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err;
  EXPECT_EQ(checked.out,
            "a trainer reached by address is checked against its name\n"
            "without a client certificate the trainer refuses\n"
            "a wrong key raises UNAUTHENTICATED\n"
            "a submitted job is created\n"
            "submitting it again returns the same job\n"
            "a config the stage rejects raises INVALID_ARGUMENT\n"
            "a cancelled job stops\n"
            "jobs are listed newest first, filtered by type\n"
            "a followed log ends when its job does\n"
            "its tail is its last lines\n"
            "the job succeeded\n"
            "a finished job cannot be cancelled\n"
            "the cancelled job ends cancelled\n"
            "an unknown job is NOT_FOUND\n");
}

}  // namespace
}  // namespace specd
