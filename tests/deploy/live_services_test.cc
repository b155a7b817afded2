// What deploy/ ships, run against real `specd serve` processes:
// - the pods' own command lines, as kustomize and the Helm chart render them, with the volumes
//   pointed at the test fixtures: every container serves on the port its probes check, and its
//   probes pass; the orchestrator finds its pair through DNS, and a request comes back over gRPC
//   and over the HTTP API. Rendered with the API key and mutual TLS too: the key comes from the
//   Secret the pods name, the certificate names the Services and nothing of loopback (as on
//   Kubernetes, where pods are reached by address), and a client without the key or the CA, or
//   a pair's client without a certificate, is refused;
// - every PromQL expression (each Grafana panel, recording rule and alert) evaluated by a real
//   Prometheus scraping processes laid out as on Kubernetes, with the job name and target labels
//   deploy/prometheus/prometheus.yml gives them: after requests in all three regimes and trainer
//   jobs that failed and reported a loss, panels and recording rules return data and alerts
//   evaluate without an error.
#include <stdlib.h>
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
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/paths.h"
#include "tests/support/prometheus_server.h"
#include "tests/support/server_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_certificates.h"
#include "yaml-cpp/yaml.h"

namespace specd {
namespace {

using ::specd::testing::FixtureDir;
using ::specd::testing::ProcessResult;
using ::specd::testing::PrometheusServer;
using ::specd::testing::RunProcess;
using ::specd::testing::ServerProcess;
using ::specd::testing::SourceDir;
using ::testing::HasSubstr;

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
  // Its startup, readiness and liveness probes: the port of a grpc probe, or the command of an
  // exec probe (specctl health under TLS; its --addr names the port).
  std::vector<int> probe_ports;
  std::vector<std::vector<std::string>> probe_commands;
  // Environment variables from Secrets: name → (Secret, key).
  std::map<std::string, std::pair<std::string, std::string>> secret_env;
};

// What the rendered pods were given: the API key (the Secrets' entries, by Secret and key) and
// the TLS Secrets' files, which the pods mount under /etc/specd. Empty: neither.
struct Secrets {
  std::map<std::pair<std::string, std::string>, std::string> entries;
  std::filesystem::path tls_dir;  // tls.crt, tls.key, ca.crt; empty: no TLS
  std::string api_key;            // what the entries hold
};

// The names the test certificate carries: the chart's and the overlay's Services (release and
// namespace `specd`), as the certificate of a real install must.
constexpr char kServiceNames[] =
    "DNS:specd-pairs.specd.svc,DNS:specd-orchestrator.specd.svc,DNS:specd-trainer.specd.svc";
constexpr char kOrchestratorName[] = "specd-orchestrator.specd.svc";
constexpr char kPairsName[] = "specd-pairs.specd.svc";
constexpr char kTrainerName[] = "specd-trainer.specd.svc";

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
      Container container;
      container.name = spec["name"].as<std::string>();
      for (const YAML::Node& arg : spec["args"]) container.args.push_back(arg.as<std::string>());
      for (const YAML::Node& port : spec["ports"]) {
        container.ports.push_back(port["containerPort"].as<int>());
      }
      for (const char* probe : {"startupProbe", "readinessProbe", "livenessProbe"}) {
        if (!spec[probe]) continue;
        if (spec[probe]["grpc"]) {
          container.probe_ports.push_back(spec[probe]["grpc"]["port"].as<int>());
        } else {
          std::vector<std::string> command;
          for (const YAML::Node& word : spec[probe]["exec"]["command"]) {
            command.push_back(word.as<std::string>());
          }
          // The port of `--addr=127.0.0.1:PORT`.
          const std::string address = FlagValue(command, "--addr");
          container.probe_ports.push_back(std::stoi(address.substr(address.rfind(':') + 1)));
          container.probe_commands.push_back(std::move(command));
        }
      }
      for (const YAML::Node& variable : spec["env"]) {
        const YAML::Node from = variable["valueFrom"]["secretKeyRef"];
        if (from) {
          container.secret_env[variable["name"].as<std::string>()] = {
              from["name"].as<std::string>(), from["key"].as<std::string>()};
        }
      }
      containers[container.name] = std::move(container);
    }
  }
  return containers;
}

// Runs the rendered containers as processes: /models and the trainer's volume point at temporary
// directories (the fixtures in place of the checkpoints), /etc/specd at the Secrets' files, each
// process picks free ports in place of its Pod ports (the orchestrator is given those its pair
// reported: start the pair first) and gets its Secret-fed environment, and the orchestrator
// resolves localhost in place of the pairs' Service.
class RenderedPods {
 public:
  RenderedPods(std::map<std::string, Container> containers, Secrets secrets)
      : containers_(std::move(containers)),
        secrets_(std::move(secrets)),
        root_(std::filesystem::temp_directory_path() /
              absl::StrCat("specd_rendered_pods_", getpid(), "_", instances_++)) {
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "models");
    if (!secrets_.tls_dir.empty()) {
      // The TLS Secret's mount, and the CA Secret's (the chart's tls.caSecretName).
      std::filesystem::create_directories(root_ / "etc/specd");
      for (const char* mount : {"tls", "tls-ca"}) {
        std::filesystem::create_directory_symlink(secrets_.tls_dir, root_ / "etc/specd" / mount);
      }
    }
    for (const auto& [name, container] : containers_) {
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
      if (flag == "--port" || flag == "--metrics-port" || flag == "--http-port") {
        arg = flag + "=0";
      }
      if (flag == "--verifier-port") arg = absl::StrCat(flag, "=", Started("verifier").port());
      if (flag == "--drafter-port" && !arg.ends_with("=0")) {
        arg = absl::StrCat(flag, "=", Started("drafter").port());
      }
      if (flag == "--pairs") arg = "--pairs=dns:localhost";
      argv.push_back(InPlace(arg));
    }
    // The child inherits the environment: the Secret's entry for the time of the spawn.
    std::vector<std::string> variables;
    for (const auto& [variable, from] : containers_.at(name).secret_env) {
      const auto entry = secrets_.entries.find(from);
      EXPECT_NE(entry, secrets_.entries.end()) << name << ": no Secret " << from.first;
      if (entry == secrets_.entries.end()) continue;
      setenv(variable.c_str(), entry->second.c_str(), /*overwrite=*/1);
      variables.push_back(variable);
    }
    std::string error;
    std::unique_ptr<ServerProcess>& server = servers_[name];
    server = ServerProcess::Start(argv, error);
    for (const std::string& variable : variables) unsetenv(variable.c_str());
    EXPECT_NE(server, nullptr) << name << ": " << error;
    return server.get();
  }

  // Runs container `name`'s probes as the kubelet would: its exec commands (specctl in place of
  // the image's), or a plain grpc health check; each one's result.
  std::vector<ProcessResult> Probe(const std::string& name) {
    const Container& container = containers_.at(name);
    const std::string address = Started(name).address();
    std::vector<ProcessResult> results;
    if (container.probe_commands.empty()) {
      results.push_back(RunProcess({SPECCTL_BINARY, "--addr", address, "health"}));
    }
    for (const std::vector<std::string>& command : container.probe_commands) {
      std::vector<std::string> argv = {SPECCTL_BINARY};
      for (auto word = std::next(command.begin()); word != command.end(); ++word) {
        argv.push_back(word->starts_with("--addr=") ? "--addr=" + address : InPlace(*word));
      }
      results.push_back(RunProcess(argv));
    }
    return results;
  }

 private:
  // `arg` with the pod's paths moved under the test's directory.
  std::string InPlace(std::string arg) const {
    arg = std::regex_replace(arg, std::regex("=/models(/|$)"),
                             "=" + (root_ / "models").string() + "$1");
    arg = std::regex_replace(arg, std::regex("=/var/lib/specd/"), "=" + root_.string() + "/");
    return std::regex_replace(arg, std::regex("=/etc/specd/"),
                              "=" + root_.string() + "/etc/specd/");
  }

  const ServerProcess& Started(const std::string& name) const {
    const auto server = servers_.find(name);
    if (server == servers_.end() || server->second == nullptr) {
      throw std::logic_error(name + " has not started");
    }
    return *server->second;
  }

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
  const Secrets secrets_;
  const std::filesystem::path root_;
  std::map<std::string, std::unique_ptr<ServerProcess>> servers_;  // by container
};

// The checks every rendering gets: the manifests agree with themselves, their commands serve and
// pass their probes, and a request comes back over gRPC and HTTP, with the key and the CA where
// `secrets` has them (and not without).
void ExpectRenderedPodsServe(const std::string& manifests, const Secrets& secrets = {}) {
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
    // Under TLS the kubelet's grpc probe cannot connect: every probe must be specctl's.
    EXPECT_EQ(container.probe_commands.size(), secrets.tls_dir.empty() ? 0u : 3u) << name;
  }
  const std::vector<std::string>& orchestrator_args = containers.at("orchestrator").args;
  EXPECT_EQ(FlagValue(orchestrator_args, "--verifier-port"),
            FlagValue(containers.at("verifier").args, "--port"));
  EXPECT_EQ(FlagValue(orchestrator_args, "--drafter-port"),
            FlagValue(containers.at("drafter").args, "--port"));
  const std::string http_port = FlagValue(orchestrator_args, "--http-port");
  ASSERT_FALSE(http_port.empty()) << "the HTTP API is on by default";
  EXPECT_NE(std::find(containers.at("orchestrator").ports.begin(),
                      containers.at("orchestrator").ports.end(), std::stoi(http_port)),
            containers.at("orchestrator").ports.end());

  RenderedPods pods(containers, secrets);
  std::map<std::string, ServerProcess*> servers;
  for (const char* name : {"verifier", "drafter", "trainer", "orchestrator"}) {
    servers[name] = pods.Start(name);
    ASSERT_NE(servers[name], nullptr);
  }
  for (const auto& [name, server] : servers) {
    for (const ProcessResult& probe : pods.Probe(name)) {
      EXPECT_EQ(probe.out, "SERVING\n") << name << ": " << probe.err;
    }
  }

  // A client: the CA and the Service's name under TLS, the key where the pods have one.
  const bool tls = !secrets.tls_dir.empty();
  const std::string ca = (secrets.tls_dir / "ca.crt").string();
  auto client_of = [&](const std::string& service) {
    return tls ? std::vector<std::string>{"--tls-ca", ca, "--tls-server-name", service}
               : std::vector<std::string>{};
  };
  const std::vector<std::string> client = client_of(kOrchestratorName);
  std::vector<std::string> keyed = client;
  if (!secrets.api_key.empty()) keyed.insert(keyed.end(), {"--api-key", secrets.api_key});
  auto generate = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"generate", "--ids", IdList(12), "--max-new-tokens", "8",
                             "--temperature", "0", "--ignore-eos", "--json"});
    return Specctl(*servers["orchestrator"], args);
  };
  const ProcessResult generated = generate(keyed);
  ASSERT_EQ(generated.exit_code, 0) << generated.err;
  const nlohmann::json response = nlohmann::json::parse(generated.out);
  EXPECT_EQ(response["ids"].size(), 8u);

  // The same through the HTTP API, as curl reaches it through a port-forward.
  const std::string host = tls ? kOrchestratorName : "127.0.0.1";
  const int http = servers["orchestrator"]->http_port();
  std::vector<std::string> curl = {"curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}"};
  if (tls) {
    curl.insert(curl.end(),
                {"--cacert", ca, "--resolve", absl::StrCat(host, ":", http, ":127.0.0.1")});
  }
  curl.insert(curl.end(),
              {absl::StrCat(tls ? "https://" : "http://", host, ":", http, "/v1/completions"), "-H",
               "Content-Type: application/json", "-d",
               nlohmann::json{{"model", FlagValue(orchestrator_args, "--model-name")},
                              {"prompt", {1, 2, 3}},
                              {"max_tokens", 4}}
                   .dump()});
  std::vector<std::string> keyed_curl = curl;
  if (!secrets.api_key.empty()) {
    keyed_curl.insert(keyed_curl.end(), {"-H", "Authorization: Bearer " + secrets.api_key});
  }
  const ProcessResult completed = RunProcess(keyed_curl);
  EXPECT_EQ(completed.out, "200") << completed.err;
  std::vector<std::string> jobs = client_of(kTrainerName);
  jobs.insert(jobs.end(), {"--api-key", secrets.api_key, "jobs", "list"});
  const ProcessResult listed = Specctl(*servers["trainer"], jobs);
  EXPECT_EQ(listed.exit_code, 0) << listed.err;

  if (!secrets.api_key.empty()) {
    EXPECT_THAT(generate(client).err, HasSubstr("UNAUTHENTICATED"));
    EXPECT_EQ(RunProcess(curl).out, "401");
  }
  if (tls) {
    // Without the CA nothing connects; a pair takes only clients with a certificate the CA signs.
    EXPECT_THAT(generate({"--api-key", secrets.api_key}).err, HasSubstr("UNAVAILABLE"));
    std::vector<std::string> uncertified = client_of(kPairsName);
    uncertified.push_back("health");
    EXPECT_THAT(Specctl(*servers["verifier"], uncertified).err, HasSubstr("UNAVAILABLE"));
  }
}

// The test's Secrets: the API key as entry `key` of Secret `secret`, and TLS files whose
// certificate names the Services.
struct SecretsOnDisk {
  ::specd::testing::TempDir dir;
  Secrets secrets;
  SecretsOnDisk(const std::string& secret, const std::string& key) {
    const ::specd::testing::TestCertificates files =
        ::specd::testing::MakeTestCertificates(dir.path(), kServiceNames);
    // A kubernetes.io/tls Secret's keys, plus cert-manager's ca.crt.
    std::filesystem::create_symlink(files.cert, dir.path() / "tls.crt");
    std::filesystem::create_symlink(files.key, dir.path() / "tls.key");
    std::filesystem::create_symlink(files.ca, dir.path() / "ca.crt");
    secrets.tls_dir = dir.path();
    secrets.api_key = "sesame-deploy";
    secrets.entries[{secret, key}] = secrets.api_key;
  }
};

TEST(DeployManifestsTest, TheKustomizePodsCommandsServeARequest) {
  const ProcessResult rendered =
      RunProcess({"/usr/bin/env", "kubectl", "kustomize",
                  (SourceDir() / "deploy/k8s/overlays/single-gpu").string()});
  ASSERT_EQ(rendered.exit_code, 0) << rendered.err;
  ExpectRenderedPodsServe(rendered.out);
}

TEST(DeployManifestsTest, TheSecuredOverlaysPodsServeWithTheKeyAndMutualTls) {
  const ProcessResult rendered =
      RunProcess({"/usr/bin/env", "kubectl", "kustomize",
                  (SourceDir() / "deploy/k8s/overlays/secured").string()});
  ASSERT_EQ(rendered.exit_code, 0) << rendered.err;
  const SecretsOnDisk secrets("specd-api-key", "api-key");
  ExpectRenderedPodsServe(rendered.out, secrets.secrets);
}

TEST(DeployManifestsTest, TheHelmChartsPodsCommandsServeARequest) {
  const ProcessResult rendered =
      RunProcess({"/bin/sh", (SourceDir() / "tests/deploy/render_chart.sh").string(),
                  SourceDir().string(), "1.31.0"});
  if (rendered.exit_code == 77) GTEST_SKIP() << rendered.err;
  ASSERT_EQ(rendered.exit_code, 0) << rendered.err;
  ExpectRenderedPodsServe(rendered.out);
}

TEST(DeployManifestsTest, TheHelmChartsPodsServeWithTheKeyAndMutualTls) {
  const ProcessResult rendered =
      RunProcess({"/bin/sh", (SourceDir() / "tests/deploy/render_chart.sh").string(),
                  SourceDir().string(), "1.31.0", "--set", "apiKey.secretName=specd-api-key",
                  "--set", "apiKey.secretKey=key", "--set", "tls.secretName=specd-tls", "--set",
                  "tls.caSecretName=specd-ca", "--set", "tls.mutual=true"});
  if (rendered.exit_code == 77) GTEST_SKIP() << rendered.err;
  ASSERT_EQ(rendered.exit_code, 0) << rendered.err;
  const SecretsOnDisk secrets("specd-api-key", "key");
  ExpectRenderedPodsServe(rendered.out, secrets.secrets);
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
  std::unique_ptr<ServerProcess> verifier =
      Serve({"--role", "verifier", "--model", FixtureDir("qwen35-tiny-a").string(), "--port", "0"});
  std::unique_ptr<ServerProcess> drafter =
      Serve({"--role", "drafter", "--drafter", FixtureDir("dflash-tiny-a").string(), "--target",
             FixtureDir("qwen35-tiny-a").string(), "--port", "0"});
  ASSERT_TRUE(verifier && drafter);
  std::unique_ptr<ServerProcess> orchestrator =
      Serve({"--role", "orchestrator", "--port", "0", "--pairs", "dns:localhost", "--verifier-port",
             std::to_string(verifier->port()), "--drafter-port", std::to_string(drafter->port()),
             "--regime-medium-from", "16", "--regime-long-from", "48"});
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
      // Guarded requests (the guard stops drafting once it has seen this random drafter fail)
      // and requests that fix blocks of 4, which draft every step.
      for (const bool fixed_blocks : {false, true}) {
        std::vector<std::string> args = {
            "generate", "--ids",        IdList(length), "--max-new-tokens", "16", "--temperature",
            "0",        "--ignore-eos", "--json"};
        if (fixed_blocks) args.insert(args.end(), {"--block-size", "4"});
        const ProcessResult generated = Specctl(*orchestrator, args);
        EXPECT_EQ(generated.exit_code, 0) << generated.err;
      }
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
