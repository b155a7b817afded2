#include "services/trainer/service/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace specd::trainer {
namespace {

// Everything the child does between fork and exec, with only async-signal-safe calls: the
// parent may have other threads holding locks the child would never see released.
[[noreturn]] void ExecChild(char* const* argv, int output_fd, bool die_with_parent, pid_t parent,
                            const std::string& exec_error) {
  setpgid(0, 0);
  if (die_with_parent) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);  // the parent died before prctl took effect
  }
  const int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
  dup2(output_fd, STDOUT_FILENO);
  dup2(output_fd, STDERR_FILENO);
  // Signals are blocked since fork (Spawn): until now the parent's handlers were still installed,
  // and a SIGTERM for this child would have run `specd serve`'s, stopping the trainer. Default
  // dispositions first (ignored ones, like gRPC's SIGPIPE, would survive exec), then a signal
  // that came meanwhile acts on the child.
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  for (int signal_number = 1; signal_number < NSIG; ++signal_number) {
    // Async-signal-safe after fork; fails harmlessly for SIGKILL, SIGSTOP and glibc's own.
    sigaction(signal_number, &default_action, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execv(argv[0], argv);
  const ssize_t written = write(STDERR_FILENO, exec_error.data(), exec_error.size());
  (void)written;
  _exit(127);
}

}  // namespace

absl::StatusOr<ChildProcess> ChildProcess::Spawn(const std::vector<std::string>& argv,
                                                 bool die_with_parent) {
  if (argv.empty()) return absl::InvalidArgumentError("no program to run");
  // Built before fork: the child may not allocate.
  std::vector<std::string> copies = argv;
  std::vector<char*> pointers;
  for (std::string& argument : copies) pointers.push_back(argument.data());
  pointers.push_back(nullptr);
  const std::string exec_error = absl::StrCat("cannot execute ", argv[0], "\n");

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::ResourceExhaustedError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  const pid_t parent = getpid();
  // The child starts with every signal blocked, until it has dropped this process's handlers.
  sigset_t all;
  sigset_t previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  const pid_t pid = fork();
  if (pid == 0) ExecChild(pointers.data(), fds[1], die_with_parent, parent, exec_error);
  const int fork_error = errno;
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", std::strerror(fork_error)));
  }
  close(fds[1]);
  fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  // Also from the parent, so that a signal sent right away finds the group.
  setpgid(pid, pid);
  return ChildProcess(pid, fds[0]);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_), output_fd_(other.output_fd_), reaped_(other.reaped_) {
  other.pid_ = -1;
  other.output_fd_ = -1;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !reaped_) {
    Signal(SIGKILL);
    int status;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (output_fd_ >= 0) close(output_fd_);
}

void ChildProcess::Signal(int signal) const {
  if (pid_ > 0 && !reaped_) kill(-pid_, signal);
}

std::optional<int> ChildProcess::TryReap() {
  if (reaped_) return std::nullopt;
  int status = 0;
  const pid_t result = waitpid(pid_, &status, WNOHANG);
  if (result != pid_) return std::nullopt;
  reaped_ = true;
  return status;
}

std::string ChildProcess::ReadAvailable(bool* at_end) {
  std::string data;
  if (at_end != nullptr) *at_end = false;
  char buffer[65536];
  while (true) {
    const ssize_t n = read(output_fd_, buffer, sizeof(buffer));
    if (n > 0) {
      data.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (at_end != nullptr) *at_end = n == 0 || errno != EAGAIN;
    return data;
  }
}

int ExitCodeOf(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return -WTERMSIG(wait_status);
  return -1;
}

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         absl::Duration timeout) {
  absl::StatusOr<ChildProcess> child = ChildProcess::Spawn(argv, /*die_with_parent=*/false);
  if (!child.ok()) return child.status();
  const absl::Time deadline = absl::Now() + timeout;
  CommandResult result;
  bool end_of_output = false;
  while (true) {
    if (!end_of_output) {
      pollfd fd{.fd = child->output_fd(), .events = POLLIN, .revents = 0};
      poll(&fd, 1, 50);
      if (fd.revents & (POLLIN | POLLHUP)) result.output += child->ReadAvailable(&end_of_output);
    } else {
      absl::SleepFor(absl::Milliseconds(10));
    }
    if (const std::optional<int> status = child->TryReap(); status.has_value()) {
      result.output += child->ReadAvailable();
      result.exit_code = ExitCodeOf(*status);
      return result;
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(argv[0], " did not finish within ",
                                                      absl::FormatDuration(timeout), "; killed"));
    }
  }
}

}  // namespace specd::trainer
