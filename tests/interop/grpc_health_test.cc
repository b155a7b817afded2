// specd's health service as a client outside the project sees it: the Python gRPC client's
// grpc.health.v1 stub (grpcio-health-checking, tests/interop/requirements.txt, installed by
// scripts/setup.sh into .cache/python) against `specd serve --role all` on loopback.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "tests/support/paths.h"
#include "tests/support/server_process.h"
#include "tests/support/subprocess.h"

namespace specd {
namespace {

using ::specd::testing::CacheDir;
using ::specd::testing::FixtureDir;
using ::specd::testing::ProcessResult;
using ::specd::testing::ServerProcess;
using ::specd::testing::SourceDir;

TEST(GrpcHealthInteropTest, ThePythonClientSeesEveryServiceServingAndUnknownOnesNotFound) {
  const std::filesystem::path python = CacheDir() / "python" / "bin" / "python";
  ASSERT_TRUE(std::filesystem::exists(python))
      << python << " is missing: scripts/setup.sh installs the Python peers";
  std::string error;
  const std::unique_ptr<ServerProcess> server = ServerProcess::Start(
      {SPECD_BINARY, "serve", "--role", "all", "--host", "127.0.0.1", "--port", "0", "--model",
       FixtureDir("qwen35-tiny-a").string(), "--drafter", FixtureDir("dflash-tiny-a").string()},
      error);
  ASSERT_NE(server, nullptr) << error;
  const ProcessResult checked = ::specd::testing::RunProcess(
      {python.string(), (SourceDir() / "tests" / "interop" / "grpc_health_client.py").string(),
       server->address(), "", "specd.v1.GenerationService", "specd.v1.TargetVerifierService",
       "specd.v1.DrafterService", "no.such.Service"});
  ASSERT_EQ(checked.exit_code, 0) << checked.err;
  EXPECT_EQ(checked.out,
            ": SERVING\n"
            "specd.v1.GenerationService: SERVING\n"
            "specd.v1.TargetVerifierService: SERVING\n"
            "specd.v1.DrafterService: SERVING\n"
            "no.such.Service: NOT_FOUND\n"
            "watch: SERVING\n");
}

}  // namespace
}  // namespace specd
