#include "tests/support/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <stdexcept>

extern char** environ;

namespace specd::testing {
namespace {

struct Pipe {
  int read_end = -1, write_end = -1;
  Pipe() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    read_end = fds[0];
    write_end = fds[1];
  }
};

}  // namespace

ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& stdin_text) {
  std::signal(SIGPIPE, SIG_IGN);  // a child that exits without reading stdin must not kill the test
  Pipe in, out, err;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in.read_end, STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out.write_end, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err.write_end, STDERR_FILENO);

  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(in.read_end);
  close(out.write_end);
  close(err.write_end);
  if (spawned != 0) {
    close(in.write_end);
    close(out.read_end);
    close(err.read_end);
    throw std::runtime_error("cannot start " + argv[0]);
  }

  // Feed stdin and drain both outputs together so neither side blocks on a full pipe.
  ProcessResult result;
  std::size_t written = 0;
  if (stdin_text.empty()) {
    close(in.write_end);
    in.write_end = -1;
  }
  std::array<pollfd, 3> fds{pollfd{out.read_end, POLLIN, 0}, pollfd{err.read_end, POLLIN, 0},
                            pollfd{in.write_end, POLLOUT, 0}};
  std::array<std::string*, 2> sinks{&result.out, &result.err};
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    if (poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[65536];
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, n);
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
      }
    }
    if (fds[2].fd >= 0 && fds[2].revents != 0) {
      const ssize_t n = write(fds[2].fd, stdin_text.data() + written, stdin_text.size() - written);
      if (n > 0) written += n;
      if (n <= 0 || written == stdin_text.size()) {
        close(fds[2].fd);
        fds[2].fd = -1;
      }
    }
  }
  if (fds[2].fd >= 0) close(fds[2].fd);

  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace specd::testing
