// What deploy/ ships, run against real `specd serve` processes:
// - the pods' own command lines, as kustomize and the Helm chart render them, with the volumes
//   pointed at the test fixtures: every container serves on the port its probes check, the
//   orchestrator finds its pair through DNS, and a request comes back;
// - every PromQL expression (each Grafana panel, recording rule and alert) evaluated by a real
//   Prometheus scraping processes laid out as on Kubernetes, with the job name and target labels
//   deploy/prometheus/prometheus.yml gives them: after requests in all three regimes and trainer
//   jobs that failed and reported a loss, panels and recording rules return data and alerts
//   evaluate without an error.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/paths.h"
#include "tests/support/prometheus_server.h"
#include "tests/support/server_process.h"
#include "tests/support/subprocess.h"
#include "yaml-cpp/yaml.h"

namespace specd {
namespace {

using ::specd::testing::FixtureDir;
using ::specd::testing::FreePort;
using ::specd::testing::ProcessResult;
using ::specd::testing::PrometheusServer;
using ::specd::testing::RunProcess;
using ::specd::testing::ServerProcess;
using ::specd::testing::SourceDir;

std::unique_ptr<ServerProcess> Serve(std::vector<std::string> args) {
  args.insert(args.begin(), {SPECD_BINARY, "serve", "--host", "127.0.0.1", "--metrics-port", "0"});
  std::string error;
  std::unique_ptr<ServerProcess> server = ServerProcess::Start(args, error);
  EXPECT_NE(server, nullptr) << error;
  return server;
}

ProcessResult Specctl(const ServerProcess& server, std::vector<std::string> args) {
  args.insert(args.begin(), {SPECCTL_BINARY, "--addr", server.address()});
  return RunProcess(args);
}

std::string IdList(int length) {
  std::string list;
  for (int i = 0; i < length; ++i) absl::StrAppend(&list, i > 0 ? "," : "", i * 37 % 300 + 1);
  return list;
}

// One container of a rendered Deployment or StatefulSet.
struct Container {
  std::string name;               // e.g. "verifier"
  std::vector<std::string> args;  // after the image's ENTRYPOINT ["specd"]
  std::vector<int> ports;         // containerPorts
  std::vector<int> probe_ports;   // grpc ports of its startup, readiness and liveness probes
};

// The value of `--flag=VALUE` in `args`; empty when absent.
std::string FlagValue(const std::vector<std::string>& args, const std::string& flag) {
  for (const std::string& arg : args) {
    if (arg.starts_with(flag + "=")) return arg.substr(flag.size() + 1);
  }
  return "";
}

// Every specd container of a multi-document manifest, by container name.
std::map<std::string, Container> SpecdContainers(const std::string& manifests) {
  std::map<std::string, Container> containers;
  for (const YAML::Node& object : YAML::LoadAll(manifests)) {
    const std::string kind = object["kind"] ? object["kind"].as<std::string>() : "";
    if (kind != "Deployment" && kind != "StatefulSet") continue;
    for (const YAML::Node& spec : object["spec"]["template"]["spec"]["containers"]) {
      Container container{
          .name = spec["name"].as<std::string>(), .args = {}, .ports = {}, .probe_ports = {}};
      for (const YAML::Node& arg : spec["args"]) container.args.push_back(arg.as<std::string>());
      for (const YAML::Node& port : spec["ports"]) {
        container.ports.push_back(port["containerPort"].as<int>());
      }
      for (const char* probe : {"startupProbe", "readinessProbe", "livenessProbe"}) {
        if (spec[probe]) container.probe_ports.push_back(spec[probe]["grpc"]["port"].as<int>());
      }
      containers[container.name] = std::move(container);
    }
  }
  return containers;
}

// Runs the rendered containers as processes: /models and the trainer's volume point at temporary
// directories (the fixtures in place of the checkpoints), each process gets free ports in place
// of its Pod ports, and the orchestrator resolves localhost in place of the pairs' Service.
class RenderedPods {
 public:
  explicit RenderedPods(std::map<std::string, Container> containers)
      : containers_(std::move(containers)),
        root_(std::filesystem::temp_directory_path() /
              absl::StrCat("specd_rendered_pods_", getpid(), "_", instances_++)) {
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "models");
    for (const auto& [name, container] : containers_) {
      ports_[name] = {FreePort(), FreePort()};
      for (const char* flag : {"--model", "--target", "--drafter"}) {
        const std::string dir = FlagValue(container.args, flag);
        if (dir.starts_with("/models/"))
          Checkpoint(dir.substr(8), std::string(flag) != "--drafter");
      }
    }
  }
  ~RenderedPods() {
    servers_.clear();
    std::filesystem::remove_all(root_);
  }

  // Starts container `name`; null (a test failure) when it does not come up.
  ServerProcess* Start(const std::string& name) {
    std::vector<std::string> argv = {SPECD_BINARY};
    for (std::string arg : containers_.at(name).args) {
      const std::string flag = arg.substr(0, arg.find('='));
      if (flag == "--port") arg = absl::StrCat(flag, "=", ports_[name].first);
      if (flag == "--metrics-port") arg = absl::StrCat(flag, "=", ports_[name].second);
      if (flag == "--http-port") arg = absl::StrCat(flag, "=", FreePort());
      if (flag == "--verifier-port") arg = absl::StrCat(flag, "=", ports_["verifier"].first);
      if (flag == "--drafter-port" && !arg.ends_with("=0")) {
        arg = absl::StrCat(flag, "=", ports_["drafter"].first);
      }
      if (flag == "--pairs") arg = "--pairs=dns:localhost";
      arg = std::regex_replace(arg, std::regex("=/models(/|$)"),
                               "=" + (root_ / "models").string() + "$1");
      arg = std::regex_replace(arg, std::regex("=/var/lib/specd/"), "=" + root_.string() + "/");
      argv.push_back(arg);
    }
    std::string error;
    servers_.push_back(ServerProcess::Start(argv, error));
    EXPECT_NE(servers_.back(), nullptr) << name << ": " << error;
    return servers_.back().get();
  }

 private:
  // models/DIR: the target fixture (with the Qwen tokenizer, as a checkpoint ships it) or the
  // drafter fixture.
  void Checkpoint(const std::string& dir, bool target) {
    const std::filesystem::path path = root_ / "models" / dir;
    if (std::filesystem::exists(path)) return;
    std::filesystem::create_directories(path);
    const std::filesystem::path fixture = FixtureDir(target ? "qwen35-tiny-a" : "dflash-tiny-a");
    for (const char* file : {"config.json", "model.safetensors"}) {
      std::filesystem::create_symlink(fixture / file, path / file);
    }
    if (target) {
      std::filesystem::create_symlink(
          ::specd::testing::CacheDir() / "tokenizer/qwen3/tokenizer.json", path / "tokenizer.json");
    }
  }

  static inline int instances_ = 0;
  const std::map<std::string, Container> containers_;
  const std::filesystem::path root_;
  std::map<std::string, std::pair<int, int>> ports_;  // container → gRPC, metrics port
  std::vector<std::unique_ptr<ServerProcess>> servers_;
};

// The checks both renderings get: the manifests agree with themselves, and their commands serve.
void ExpectRenderedPodsServe(const std::string& manifests) {
  const std::map<std::string, Container> containers = SpecdContainers(manifests);
  for (const char* name : {"orchestrator", "verifier", "drafter", "trainer"}) {
    ASSERT_TRUE(containers.contains(name)) << name;
  }
  for (const auto& [name, container] : containers) {
    const int port = std::stoi(FlagValue(container.args, "--port"));
    const int metrics_port = std::stoi(FlagValue(container.args, "--metrics-port"));
    EXPECT_EQ(container.probe_ports, std::vector<int>(3, port)) << name << ": probes on --port";
    EXPECT_NE(std::find(container.ports.begin(), container.ports.end(), port),
              container.ports.end())
        << name;
    EXPECT_NE(std::find(container.ports.begin(), container.ports.end(), metrics_port),
              container.ports.end())
        << name;
  }
  EXPECT_EQ(FlagValue(containers.at("orchestrator").args, "--verifier-port"),
            FlagValue(containers.at("verifier").args, "--port"));
  EXPECT_EQ(FlagValue(containers.at("orchestrator").args, "--drafter-port"),
            FlagValue(containers.at("drafter").args, "--port"));

  RenderedPods pods(containers);
  std::vector<ServerProcess*> servers;
  for (const char* name : {"verifier", "drafter", "trainer", "orchestrator"}) {
    servers.push_back(pods.Start(name));
    ASSERT_NE(servers.back(), nullptr);
  }
  for (ServerProcess* server : servers) {
    const ProcessResult health = Specctl(*server, {"health"});
    EXPECT_EQ(health.out, "SERVING\n") << health.err;
  }
  const ProcessResult generated =
      Specctl(*servers.back(), {"generate", "--ids", IdList(12), "--max-new-tokens", "8",
                                "--temperature", "0", "--ignore-eos", "--json"});
  ASSERT_EQ(generated.exit_code, 0) << generated.err;
  const nlohmann::json response = nlohmann::json::parse(generated.out);
  EXPECT_EQ(response["ids"].size(), 8u);
}

TEST(DeployManifestsTest, TheKustomizePodsCommandsServeARequest) {
  const ProcessResult rendered =
      RunProcess({"/usr/bin/env", "kubectl", "kustomize",
                  (SourceDir() / "deploy/k8s/overlays/single-gpu").string()});
  ASSERT_EQ(rendered.exit_code, 0) << rendered.err;
  ExpectRenderedPodsServe(rendered.out);
}

TEST(DeployManifestsTest, TheHelmChartsPodsCommandsServeARequest) {
  const ProcessResult rendered =
      RunProcess({"/bin/sh", (SourceDir() / "tests/deploy/render_chart.sh").string(),
                  SourceDir().string(), "1.31.0"});
  if (rendered.exit_code == 77) GTEST_SKIP() << rendered.err;
  ASSERT_EQ(rendered.exit_code, 0) << rendered.err;
  ExpectRenderedPodsServe(rendered.out);
}

struct Expression {
  std::string kind;  // panel, record or alert
  std::string name;
  std::string source;
  std::string expr;
};

// What tests/deploy/promql_queries.mjs lists: the expressions with Grafana's variables replaced.
std::vector<Expression> DeployedExpressions() {
  const ProcessResult listed = RunProcess(
      {"/usr/bin/env", "node", (SourceDir() / "tests/deploy/promql_queries.mjs").string(),
       SourceDir().string()});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  std::vector<Expression> expressions;
  std::istringstream lines(listed.out);
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json item = nlohmann::json::parse(line);
    expressions.push_back({item["kind"], item["name"], item["source"], item["expr"]});
  }
  return expressions;
}

TEST(DeployQueriesTest, EveryPanelRuleAndAlertEvaluatesAgainstLiveServices) {
  const std::vector<Expression> expressions = DeployedExpressions();
  ASSERT_FALSE(expressions.empty());

  // The serving pods: one pair, found by the orchestrator as on Kubernetes (dns:NAME).
  const std::string verifier_port = std::to_string(FreePort());
  const std::string drafter_port = std::to_string(FreePort());
  std::unique_ptr<ServerProcess> verifier =
      Serve({"--role", "verifier", "--model", FixtureDir("qwen35-tiny-a").string(), "--port",
             verifier_port});
  std::unique_ptr<ServerProcess> drafter =
      Serve({"--role", "drafter", "--drafter", FixtureDir("dflash-tiny-a").string(), "--target",
             FixtureDir("qwen35-tiny-a").string(), "--port", drafter_port});
  ASSERT_TRUE(verifier && drafter);
  std::unique_ptr<ServerProcess> orchestrator =
      Serve({"--role", "orchestrator", "--port", "0", "--pairs", "dns:localhost", "--verifier-port",
             verifier_port, "--drafter-port", drafter_port, "--regime-medium-from", "16",
             "--regime-long-from", "48"});
  ASSERT_NE(orchestrator, nullptr);

  // The trainer, with a job that fails and one cancelled once it has reported a loss.
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / absl::StrCat("specd_deploy_queries_", getpid());
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  std::unique_ptr<ServerProcess> trainer =
      Serve({"--role", "trainer", "--port", "0", "--work-root", (root / "work").string()});
  ASSERT_NE(trainer, nullptr);
  {
    std::ifstream example(SourceDir() / "configs/train/pretrain.yaml");
    std::stringstream config;
    config << example.rdbuf();
    std::ofstream(root / "missing-data.yaml")
        << std::regex_replace(config.str(), std::regex("data: .*"), "data: nonexistent-data");
  }
  std::ofstream(root / "smoke.yaml") << "preset: smoke\n";
  // `specctl jobs submit` prints "job_id: ID" first.
  auto submit = [&](const std::string& type, const std::filesystem::path& config) {
    const ProcessResult submitted =
        Specctl(*trainer, {"jobs", "submit", type, "--config", config.string()});
    EXPECT_EQ(submitted.exit_code, 0) << submitted.err;
    std::smatch id;
    return std::regex_search(submitted.out, id, std::regex("job_id: +(\\S+)")) ? id[1].str() : "";
  };
  const std::string smoke_id = submit("pipeline", root / "smoke.yaml");
  ASSERT_FALSE(smoke_id.empty());

  const std::string config = absl::StrCat(
      "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
      "rule_files: [specd-rules.yml]\n"
      "scrape_configs:\n"
      "  - job_name: specd\n"
      "    static_configs:\n"
      "      - targets: ['127.0.0.1:",
      orchestrator->metrics_port(),
      "']\n"
      "        labels: {component: orchestrator, container: orchestrator}\n"
      "      - targets: ['127.0.0.1:",
      verifier->metrics_port(),
      "']\n"
      "        labels: {component: pair, container: verifier}\n"
      "      - targets: ['127.0.0.1:",
      drafter->metrics_port(),
      "']\n"
      "        labels: {component: pair, container: drafter}\n"
      "      - targets: ['127.0.0.1:",
      trainer->metrics_port(),
      "']\n"
      "        labels: {component: trainer, container: trainer}\n");
  std::string error;
  std::unique_ptr<PrometheusServer> prometheus =
      PrometheusServer::Start(config, {SourceDir() / "deploy/prometheus/specd-rules.yml"}, error);
  ASSERT_NE(prometheus, nullptr) << error;

  // Rates need two scrapes on each side of the traffic: wait for every target, then send requests
  // in every regime (short < 16 ≤ medium < 48 ≤ long prompt tokens) in rounds a few scrapes apart.
  for (int i = 0; i < 120; ++i) {
    absl::StatusOr<nlohmann::json> up = prometheus->Query("up == 1");
    if (up.ok() && up->size() == 4) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  // Failed after the first scrape, so that increase() sees the counter go up.
  ASSERT_FALSE(submit("pretrain", root / "missing-data.yaml").empty());
  for (int round = 0; round < 3; ++round) {
    for (const int length : {8, 24, 60}) {
      const ProcessResult generated =
          Specctl(*orchestrator, {"generate", "--ids", IdList(length), "--max-new-tokens", "16",
                                  "--temperature", "0", "--ignore-eos", "--json"});
      EXPECT_EQ(generated.exit_code, 0) << generated.err;
    }
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }

  // The pipeline reports its first loss within a minute or so; then it is cancelled.
  bool reported = false;
  for (int i = 0; i < 600 && !reported; ++i) {
    absl::StatusOr<nlohmann::json> loss =
        prometheus->Query(absl::StrCat("specd_trainer_job_loss{job_id=\"", smoke_id, "\"}"));
    reported = loss.ok() && !loss->empty();
    if (!reported) std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  ASSERT_TRUE(reported) << trainer->log();
  ASSERT_EQ(Specctl(*trainer, {"jobs", "cancel", smoke_id}).exit_code, 0);

  // Every expression evaluates; panels and recording rules return data (retried while the last
  // scrapes and rule evaluations arrive); alerts stay quiet or fire, but never fail.
  std::map<std::string, std::string> failures;  // "kind name (source)" → why
  for (int attempt = 0; attempt < 40; ++attempt) {
    failures.clear();
    for (const Expression& expression : expressions) {
      const std::string what =
          absl::StrCat(expression.kind, " \"", expression.name, "\" (", expression.source, ")");
      absl::StatusOr<nlohmann::json> result = prometheus->Query(expression.expr);
      if (!result.ok()) {
        failures[what] = std::string(result.status().message());
      } else if (expression.kind != "alert" && result->empty()) {
        failures[what] = "no data";
      }
    }
    if (failures.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  for (const auto& [what, why] : failures) ADD_FAILURE() << what << ": " << why;
  // The failed job (it ran once the cancelled one made room) fires the alert that watches jobs.
  bool alerted = false;
  for (int i = 0; i < 120 && !alerted; ++i) {
    absl::StatusOr<nlohmann::json> failed =
        prometheus->Query("ALERTS{alertname=\"SpecdTrainingJobFailed\", alertstate=\"firing\"}");
    alerted = failed.ok() && failed->size() == 1;
    if (!alerted) std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  EXPECT_TRUE(alerted) << "no SpecdTrainingJobFailed alert";
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace specd
