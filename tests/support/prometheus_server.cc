#include "tests/support/prometheus_server.h"

#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "tests/support/free_port.h"

namespace specd::testing {

std::unique_ptr<PrometheusServer> PrometheusServer::Start(
    const std::string& config, const std::vector<std::filesystem::path>& rules,
    std::string& error) {
  static int started = 0;
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    absl::StrCat("specd_prometheus_", getpid(), "_", started++);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const std::filesystem::path& file : rules) {
    std::filesystem::copy_file(file, dir / file.filename());
  }
  std::ofstream(dir / "prometheus.yml") << config;
  const int port = FreePort();
  std::unique_ptr<ServerProcess> process = ServerProcess::Start(
      {"/usr/bin/prometheus", "--config.file=" + (dir / "prometheus.yml").string(),
       "--storage.tsdb.path=" + (dir / "data").string(),
       "--web.listen-address=127.0.0.1:" + std::to_string(port)},
      error, std::chrono::seconds(60), "Server is ready to receive web requests");
  if (process == nullptr) {
    std::filesystem::remove_all(dir);
    return nullptr;
  }
  return std::unique_ptr<PrometheusServer>(new PrometheusServer(dir, port, std::move(process)));
}

PrometheusServer::~PrometheusServer() {
  process_.reset();
  std::filesystem::remove_all(dir_);
}

absl::StatusOr<nlohmann::json> PrometheusServer::Query(const std::string& promql) const {
  httplib::Client client("127.0.0.1", port_);
  const httplib::Result result =
      client.Get("/api/v1/query", httplib::Params{{"query", promql}}, httplib::Headers());
  if (!result) return absl::UnavailableError("Prometheus does not answer");
  const nlohmann::json body = nlohmann::json::parse(result->body, nullptr, false);
  if (!body.is_object()) return absl::InternalError(absl::StrCat("not JSON: ", result->body));
  if (body.value("status", "") != "success") {
    return absl::InvalidArgumentError(
        absl::StrCat(body.value("errorType", "?"), ": ", body.value("error", "?")));
  }
  return body["data"]["result"];
}

}  // namespace specd::testing
