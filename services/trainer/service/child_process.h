#pragma once
// A child process whose stdout and stderr reach the parent through one pipe, in its own process
// group so a signal reaches everything it started; and running a short command to completion.
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace specd::trainer {

class ChildProcess {
 public:
  // Starts `argv[0]` (a path) with `argv`. With `die_with_parent` the child gets SIGTERM when
  // the thread that called Spawn exits (PR_SET_PDEATHSIG), so it must be a long-lived thread.
  // The pipe's read end is non-blocking. A program that cannot be executed exits with 127
  // after printing why.
  static absl::StatusOr<ChildProcess> Spawn(const std::vector<std::string>& argv,
                                            bool die_with_parent);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  // Kills and reaps a child that is still running.
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  int output_fd() const { return output_fd_; }

  // Sends `signal` to the child's process group.
  void Signal(int signal) const;
  // The wait status once the child has exited (it is then reaped); nullopt while it runs.
  std::optional<int> TryReap();
  // Reads what the pipe holds now (empty when nothing is there); `at_end` (if given) says
  // whether every writer has closed it.
  std::string ReadAvailable(bool* at_end = nullptr);

 private:
  ChildProcess(pid_t pid, int output_fd) : pid_(pid), output_fd_(output_fd) {}

  pid_t pid_;
  int output_fd_;
  bool reaped_ = false;
};

// The process's exit status, or minus the signal that ended it (Job.exit_code's convention).
int ExitCodeOf(int wait_status);

struct CommandResult {
  int exit_code = 0;  // as ExitCodeOf
  std::string output;
};

// Runs `argv` to completion, with stdout and stderr together; DEADLINE_EXCEEDED (after killing
// it) if it runs longer than `timeout`.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         absl::Duration timeout);

}  // namespace specd::trainer
