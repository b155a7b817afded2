#pragma once
// A real Prometheus (Debian's /usr/bin/prometheus) for integration tests: started on a free
// loopback port with the configuration a test writes, asked instant queries over its HTTP API.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tests/support/server_process.h"

namespace specd::testing {

class PrometheusServer {
 public:
  // Null (with its log in `error`) when it does not start. `config` is prometheus.yml's text; the
  // `rules` files are copied beside it, so that its rule_files name them by file name.
  static std::unique_ptr<PrometheusServer> Start(const std::string& config,
                                                 const std::vector<std::filesystem::path>& rules,
                                                 std::string& error);
  ~PrometheusServer();  // stops it and deletes its data

  // An instant query's `data.result` array; the query's own error (bad PromQL, a failed
  // evaluation) as INVALID_ARGUMENT.
  absl::StatusOr<nlohmann::json> Query(const std::string& promql) const;
  std::string log() const { return process_->log(); }

 private:
  PrometheusServer(std::filesystem::path dir, int port, std::unique_ptr<ServerProcess> process)
      : dir_(std::move(dir)), port_(port), process_(std::move(process)) {}

  std::filesystem::path dir_;
  int port_;
  std::unique_ptr<ServerProcess> process_;
};

}  // namespace specd::testing
