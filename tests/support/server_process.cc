#include "tests/support/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

extern char** environ;

namespace specd::testing {
namespace {

std::filesystem::path NewLogPath() {
  static int counter = 0;
  return std::filesystem::temp_directory_path() /
         ("specd_server_" + std::to_string(getpid()) + "_" + std::to_string(++counter) + ".log");
}

}  // namespace

std::unique_ptr<ServerProcess> ServerProcess::Start(const std::vector<std::string>& argv,
                                                    std::string& error,
                                                    std::chrono::seconds timeout,
                                                    const std::string& ready_line) {
  const std::filesystem::path log_path = NewLogPath();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    error = "cannot start " + argv[0];
    return nullptr;
  }
  std::unique_ptr<ServerProcess> server(new ServerProcess(pid, log_path));
  // The whole line (the server writes it in pieces): gRPC, then metrics and HTTP if served.
  const std::regex listening(
      R"(specd serve: .*? on [^ ,]*:(\d+)(, metrics on :(\d+)/metrics)?(, HTTP API on :(\d+))?\n)");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::smatch match;
    const std::string log = server->log();
    if (!ready_line.empty()) {
      if (log.find(ready_line) != std::string::npos) return server;
    } else if (std::regex_search(log, match, listening)) {
      server->port_ = std::stoi(match[1]);
      if (match[3].matched) server->metrics_port_ = std::stoi(match[3]);
      if (match[5].matched) server->http_port_ = std::stoi(match[5]);
      return server;
    }
    if (!server->running()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  error = "the server did not start: " + server->log();
  return nullptr;
}

ServerProcess::~ServerProcess() {
  if (running()) {
    Signal(SIGTERM);
    for (int i = 0; i < 400 && running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (running()) Signal(SIGKILL);
  }
  Wait();
  std::filesystem::remove(log_path_);
}

void ServerProcess::Signal(int signal) const { kill(pid_, signal); }

int ServerProcess::Wait() {
  if (!reaped_) {
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return exit_code_;
}

bool ServerProcess::running() {
  if (reaped_) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    reaped_ = true;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  return true;
}

std::string ServerProcess::log() const {
  std::ifstream file(log_path_);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace specd::testing
