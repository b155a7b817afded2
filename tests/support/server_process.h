#pragma once
// A long-running server (e.g. `specd serve --role verifier …`) started as a real child process
// for integration tests: its stderr goes to a file, and Start waits for the line a specd server
// prints once it listens ("specd serve: … on HOST:PORT[, metrics on :M/metrics][, HTTP API on
// :H]") or another server's ready line.
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace specd::testing {

class ServerProcess {
 public:
  // Null (with the log in `error`) if the server exits or stays silent for `timeout`. Other
  // servers (e.g. Prometheus) are ready once their log contains `ready_line`.
  static std::unique_ptr<ServerProcess> Start(
      const std::vector<std::string>& argv, std::string& error,
      std::chrono::seconds timeout = std::chrono::seconds(180), const std::string& ready_line = "");
  // SIGTERM, then SIGKILL if it has not exited within 20 s.
  ~ServerProcess();

  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }  // -1 without --metrics-port
  int http_port() const { return http_port_; }        // -1 without --http-port
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }

  void Signal(int signal) const;
  // Waits for the process to end; its exit status, or 128 + the signal that ended it.
  int Wait();
  bool running();
  std::string log() const;  // everything it wrote to stderr so far

 private:
  ServerProcess(pid_t pid, std::filesystem::path log_path)
      : pid_(pid), log_path_(std::move(log_path)) {}

  pid_t pid_;
  std::filesystem::path log_path_;
  int port_ = 0;
  int metrics_port_ = -1;
  int http_port_ = -1;
  bool reaped_ = false;
  int exit_code_ = -1;
};

}  // namespace specd::testing
