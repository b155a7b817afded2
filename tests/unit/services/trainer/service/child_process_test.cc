// ChildProcess and RunCommand on /bin/sh: output of both streams, exit codes, signals, timeouts.
#include "services/trainer/service/child_process.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace specd::trainer {
namespace {

TEST(RunCommand, CapturesStdoutAndStderrAndTheExitStatus) {
  absl::StatusOr<CommandResult> result =
      RunCommand({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, absl::Seconds(10));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 3);
  EXPECT_EQ(result->output, "out\nerr\n");
}

TEST(RunCommand, AProgramThatCannotRunExitsWith127SayingSo) {
  absl::StatusOr<CommandResult> result = RunCommand({"/nonexistent/specd"}, absl::Seconds(10));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->exit_code, 127);
  EXPECT_EQ(result->output, "cannot execute /nonexistent/specd\n");
}

TEST(RunCommand, ACommandPastItsTimeoutIsKilled) {
  const absl::Time start = absl::Now();
  absl::StatusOr<CommandResult> result = RunCommand({"/bin/sleep", "30"}, absl::Milliseconds(300));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(ChildProcess, ASignalEndsItAndItsExitCodeIsMinusTheSignal) {
  absl::StatusOr<ChildProcess> child =
      ChildProcess::Spawn({"/bin/sh", "-c", "sleep 30"}, /*die_with_parent=*/true);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_FALSE(child->TryReap().has_value());
  child->Signal(SIGTERM);
  std::optional<int> status;
  for (int i = 0; i < 100 && !status.has_value(); ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    status = child->TryReap();
  }
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(ExitCodeOf(*status), -SIGTERM);
}

}  // namespace
}  // namespace specd::trainer
