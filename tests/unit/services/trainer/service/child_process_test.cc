// ChildProcess and RunCommand on /bin/sh: output of both streams, exit codes, signals, timeouts.
#include "services/trainer/service/child_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

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

// The write end of a pipe the test's SIGTERM handler writes a byte into, as `specd serve`'s does.
int handler_pipe[2] = {-1, -1};

void WriteAByte(int) {
  const char byte = 1;
  (void)!write(handler_pipe[1], &byte, 1);
}

// Between fork and exec the child still has the parent's signal handlers. A signal arriving
// there must end the child, not run the parent's handler in it: a trainer job cancelled as it
// started used to stop the whole `specd serve` (its handler wrote to the stop pipe) and live on.
TEST(ChildProcess, ASignalRightAfterSpawnEndsTheChildAndRunsNoHandlerOfTheParent) {
  ASSERT_EQ(pipe2(handler_pipe, O_CLOEXEC | O_NONBLOCK), 0);
  struct sigaction handler = {};
  handler.sa_handler = WriteAByte;
  sigemptyset(&handler.sa_mask);
  struct sigaction previous = {};
  sigaction(SIGTERM, &handler, &previous);
  for (int attempt = 0; attempt < 200; ++attempt) {
    absl::StatusOr<ChildProcess> child =
        ChildProcess::Spawn({"/bin/sleep", "30"}, /*die_with_parent=*/true);
    ASSERT_TRUE(child.ok()) << child.status();
    child->Signal(SIGTERM);
    std::optional<int> status;
    for (int i = 0; i < 500 && !status.has_value(); ++i) {
      status = child->TryReap();
      if (!status.has_value()) absl::SleepFor(absl::Milliseconds(10));
    }
    if (!status.has_value() || ExitCodeOf(*status) != -SIGTERM) {
      ADD_FAILURE() << "attempt " << attempt << ": the child "
                    << (status.has_value() ? "exited with " + std::to_string(ExitCodeOf(*status))
                                           : "outlived SIGTERM");
      break;
    }
  }
  char byte;
  EXPECT_EQ(read(handler_pipe[0], &byte, 1), -1) << "the parent's handler ran in a child";
  sigaction(SIGTERM, &previous, nullptr);
  close(handler_pipe[0]);
  close(handler_pipe[1]);
}

}  // namespace
}  // namespace specd::trainer
