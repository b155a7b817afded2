// specd's health service as a client outside the project sees it: the Python gRPC client's
// grpc.health.v1 stub (grpcio-health-checking, scripts/python-requirements.txt, installed by
// scripts/setup.sh into .cache/python) against `specd serve --role all` on loopback.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/interop/python_peers.h"
#include "tests/support/paths.h"
#include "tests/support/server_process.h"
#include "tests/support/subprocess.h"

namespace specd {
namespace {

using ::specd::testing::FixtureDir;
using ::specd::testing::ProcessResult;
using ::specd::testing::RunPeerScript;
using ::specd::testing::ServerProcess;

TEST(GrpcHealthInteropTest, ThePythonClientSeesEveryServiceServingAndUnknownOnesNotFound) {
  std::string error;
  const std::unique_ptr<ServerProcess> server = ServerProcess::Start(
      {SPECD_BINARY, "serve", "--role", "all", "--host", "127.0.0.1", "--port", "0", "--model",
       FixtureDir("qwen35-tiny-a").string(), "--drafter", FixtureDir("dflash-tiny-a").string()},
      error);
  ASSERT_NE(server, nullptr) << error;
  const ProcessResult checked =
      RunPeerScript("grpc_health_client.py", {server->address(), "", "specd.v1.GenerationService",
                                              "specd.v1.TargetVerifierService",
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
