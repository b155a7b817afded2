// The serving system as users run it: `specd serve` processes on loopback (verifier, drafter and
// orchestrator apart, or `--role all`), driven by `specctl` and by gRPC clients, scraped by a real
// Prometheus. Distributed, embedded and local generation agree token for token; the system keeps
// serving when the drafter dies, frees what cancelled or vanished clients held, answers bad input
// with the contract's codes and leaves nothing in /dev/shm.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
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
#include "specd/v1/generation.grpc.pb.h"
#include "tests/support/free_port.h"
#include "tests/support/paths.h"
#include "tests/support/prometheus_server.h"
#include "tests/support/server_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_certificates.h"

namespace specd {
namespace {

using ::specd::testing::FreePort;
using ::specd::testing::ProcessResult;
using ::specd::testing::PrometheusServer;
using ::specd::testing::RunProcess;
using ::specd::testing::ServerProcess;
using ::testing::HasSubstr;

constexpr int kNewTokens = 24;

std::string Target() { return ::specd::testing::FixtureDir("qwen35-tiny-a").string(); }
std::string Drafter() { return ::specd::testing::FixtureDir("dflash-tiny-a").string(); }

std::string IdList(int length, int seed) {
  std::string list;
  for (int i = 0; i < length; ++i) {
    if (i > 0) list += ',';
    list += std::to_string((seed * 131 + i * 17) % 300 + 1);
  }
  return list;
}

std::unique_ptr<ServerProcess> Serve(std::vector<std::string> args) {
  std::vector<std::string> argv = {SPECD_BINARY, "serve", "--host",         "127.0.0.1",
                                   "--port",     "0",     "--metrics-port", "0"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string error;
  std::unique_ptr<ServerProcess> server = ServerProcess::Start(argv, error);
  EXPECT_NE(server, nullptr) << error;
  return server;
}

// Verifier, drafter and an orchestrator between them, each its own process.
struct Distributed {
  // `orchestrator_flags` go to the orchestrator after the pair's addresses and regimes; the
  // drafter serves `drafter_source` (serve's --drafter).
  explicit Distributed(const std::vector<std::string>& orchestrator_flags = {},
                       const std::string& drafter_source = Drafter())
      : drafter(Serve({"--role", "drafter", "--drafter", drafter_source, "--target", Target()})) {
    if (!verifier || !drafter) return;
    std::vector<std::string> args = {"--role",
                                     "orchestrator",
                                     "--verifier-addr",
                                     verifier->address(),
                                     "--drafter-addr",
                                     drafter->address(),
                                     "--regime-medium-from",
                                     "16",
                                     "--regime-long-from",
                                     "48"};
    args.insert(args.end(), orchestrator_flags.begin(), orchestrator_flags.end());
    orchestrator = Serve(args);
  }

  std::unique_ptr<ServerProcess> verifier = Serve({"--role", "verifier", "--model", Target()});
  std::unique_ptr<ServerProcess> drafter;
  std::unique_ptr<ServerProcess> orchestrator;
  bool ok() const { return verifier && drafter && orchestrator; }
};

ProcessResult Specctl(const std::string& address, std::vector<std::string> args) {
  args.insert(args.begin(), {SPECCTL_BINARY, "--addr", address});
  return RunProcess(args);
}

std::vector<int64_t> GeneratedIds(const ProcessResult& run) {
  EXPECT_EQ(run.exit_code, 0) << run.err;
  if (run.exit_code != 0) return {};
  return nlohmann::json::parse(run.out)["ids"].get<std::vector<int64_t>>();
}

std::vector<int64_t> SpecctlIds(const std::string& address, const std::string& ids,
                                bool stream = false) {
  std::vector<std::string> args = {"generate",
                                   "--ids",
                                   ids,
                                   "--max-new-tokens",
                                   std::to_string(kNewTokens),
                                   "--temperature",
                                   "0",
                                   "--ignore-eos",
                                   "--json"};
  if (stream) args.push_back("--stream");
  return GeneratedIds(Specctl(address, args));
}

std::vector<int64_t> LocalIds(const std::string& ids, bool with_drafter) {
  std::vector<std::string> args = {SPECD_BINARY,
                                   "generate",
                                   "--model",
                                   Target(),
                                   "--ids",
                                   ids,
                                   "--max-new-tokens",
                                   std::to_string(kNewTokens),
                                   "--ignore-eos",
                                   "--format",
                                   "json"};
  if (with_drafter) args.insert(args.end(), {"--drafter", Drafter()});
  return GeneratedIds(RunProcess(args));
}

std::string Metrics(const ServerProcess& server, const std::string& host = "127.0.0.1") {
  httplib::Client client(host, server.metrics_port());
  const httplib::Result result = client.Get("/metrics");
  return result && result->status == 200 ? result->body : "";
}

// The value of an unlabelled sample, or -1.
double Sample(const std::string& metrics, const std::string& name) {
  const std::regex line("(^|\n)" + name + " ([0-9.e+-]+)");
  std::smatch match;
  return std::regex_search(metrics, match, line) ? std::stod(match[2]) : -1;
}

// Waits up to 10 s for `name` to read `value` on `server`'s /metrics.
bool EventuallyReads(const ServerProcess& server, const std::string& name, double value) {
  for (int i = 0; i < 200; ++i) {
    if (Sample(Metrics(server), name) == value) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

std::vector<std::string> SharedMemoryOf(pid_t pid) {
  std::vector<std::string> names;
  const std::string prefix = "specd." + std::to_string(pid) + ".";
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) names.push_back(name);
  }
  return names;
}

std::unique_ptr<v1::GenerationService::Stub> Stub(const std::string& address) {
  return v1::GenerationService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

v1::GenerateStreamRequest StreamRequest(const std::string& ids, int max_new_tokens) {
  v1::GenerateStreamRequest request;
  std::stringstream list(ids);
  for (std::string id; std::getline(list, id, ',');) {
    request.mutable_prompt()->mutable_token_ids()->add_ids(std::stoi(id));
  }
  request.mutable_sampling()->set_max_new_tokens(max_new_tokens);
  request.mutable_sampling()->set_temperature(0);
  request.mutable_sampling()->set_ignore_eos(true);
  return request;
}

TEST(SpecdServeTest, DistributedEmbeddedAndLocalGenerationGiveTheSameIds) {
  Distributed distributed;
  ASSERT_TRUE(distributed.ok());
  std::unique_ptr<ServerProcess> all =
      Serve({"--role", "all", "--model", Target(), "--drafter", Drafter()});
  ASSERT_NE(all, nullptr);
  for (const std::string& ids : {IdList(8, 1), IdList(30, 2)}) {
    const std::vector<int64_t> local = LocalIds(ids, /*with_drafter=*/false);
    ASSERT_EQ(local.size(), kNewTokens);
    EXPECT_EQ(LocalIds(ids, /*with_drafter=*/true), local);
    EXPECT_EQ(SpecctlIds(distributed.orchestrator->address(), ids), local);
    EXPECT_EQ(SpecctlIds(distributed.orchestrator->address(), ids, /*stream=*/true), local);
    EXPECT_EQ(SpecctlIds(all->address(), ids), local);
  }
  for (const ServerProcess* server : {distributed.verifier.get(), distributed.drafter.get(),
                                      distributed.orchestrator.get(), all.get()}) {
    const ProcessResult health = Specctl(server->address(), {"health"});
    EXPECT_EQ(health.exit_code, 0) << health.err;
    EXPECT_EQ(health.out, "SERVING\n");
    const ProcessResult lint =
        RunProcess({"/usr/bin/promtool", "check", "metrics"}, Metrics(*server));
    EXPECT_EQ(lint.exit_code, 0) << lint.out << lint.err;
    EXPECT_EQ(lint.out + lint.err, "");
  }
  EXPECT_GT(Sample(Metrics(*distributed.orchestrator),
                   "specd_spec_decode_num_drafts_total\\{model=\"specd\",regime=\"short\"\\}"),
            0);
  // Forwards ran batched on every model, and the caches' budget is reported.
  for (const auto& [server, role] : {std::pair{distributed.verifier.get(), "verifier"},
                                     {distributed.drafter.get(), "drafter"},
                                     {all.get(), "verifier"},
                                     {all.get(), "drafter"}}) {
    const std::string metrics = Metrics(*server);
    EXPECT_GT(
        Sample(metrics, absl::StrCat("specd_iteration_tokens_count\\{role=\"", role, "\"\\}")), 0)
        << role;
    EXPECT_GT(Sample(metrics, "specd_cache_memory_capacity_bytes"), 0) << role;
  }
}

// The suffix drafter, alone or with the DFlash drafter, is served lossless in process and as a
// drafter role of its own, and drafts once the output repeats itself (the fixture falls into one
// token after ~45).
TEST(SpecdServeTest, TheSuffixDrafterIsServedLosslesslyEmbeddedAndDistributed) {
  const std::vector<std::string> request = {"--ids", "5,17,42,99,7,256,3,18", "--max-new-tokens",
                                            "80", "--ignore-eos"};
  std::vector<std::string> local = {SPECD_BINARY, "generate", "--model",
                                    Target(),     "--format", "json"};
  local.insert(local.end(), request.begin(), request.end());
  const std::vector<int64_t> target_only = GeneratedIds(RunProcess(local));
  std::vector<std::string> served = {"generate", "--temperature", "0", "--stream", "--json"};
  served.insert(served.end(), request.begin(), request.end());
  for (const std::string& drafter : {std::string("suffix"), "suffix+" + Drafter()}) {
    // Unguarded, so that every step drafts whatever the timings.
    std::unique_ptr<ServerProcess> all = Serve(
        {"--role", "all", "--model", Target(), "--drafter", drafter, "--no-speculation-guard"});
    Distributed distributed({"--no-speculation-guard"}, drafter);
    ASSERT_TRUE(all != nullptr && distributed.ok()) << drafter;
    for (const ServerProcess* orchestrator : {all.get(), distributed.orchestrator.get()}) {
      EXPECT_EQ(GeneratedIds(Specctl(orchestrator->address(), served)), target_only) << drafter;
      EXPECT_GT(Sample(Metrics(*orchestrator),
                       "specd_spec_decode_num_accepted_tokens_total\\{model=\"specd\","
                       "regime=\"short\"\\}"),
                0)
          << drafter;
    }
  }
}

TEST(SpecdServeTest, ThirtyTwoConcurrentStreamsFinishWithoutErrorsOrLeaks) {
  Distributed distributed;
  ASSERT_TRUE(distributed.ok());
  const std::string expected_ids = IdList(10, 3);
  const std::vector<int64_t> expected = LocalIds(expected_ids, false);
  std::atomic<int> failures = 0;
  std::atomic<int> finished = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::vector<std::thread> clients;
  for (int client = 0; client < 32; ++client) {
    clients.emplace_back([&, client] {
      auto stub = Stub(distributed.orchestrator->address());
      // Every client runs requests back to back until the time is up; the first of client 0
      // is checked against local generation.
      do {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
        const std::string ids = client == 0 ? expected_ids : IdList(6 + client % 7, client);
        auto reader = stub->GenerateStream(&context, StreamRequest(ids, kNewTokens));
        std::vector<int64_t> got;
        v1::GenerateStreamResponse message;
        while (reader->Read(&message)) {
          got.insert(got.end(), message.token_ids().begin(), message.token_ids().end());
        }
        const grpc::Status status = reader->Finish();
        if (!status.ok() || got.size() != kNewTokens || (client == 0 && got != expected)) {
          ++failures;
        }
        ++finished;
      } while (std::chrono::steady_clock::now() < until);
    });
  }
  for (std::thread& client : clients) client.join();
  EXPECT_EQ(failures, 0);
  EXPECT_GE(finished, 32);
  EXPECT_TRUE(EventuallyReads(*distributed.verifier, "specd_verifier_open_sessions", 0));
  EXPECT_TRUE(EventuallyReads(*distributed.drafter, "specd_drafter_open_sessions", 0));
  EXPECT_TRUE(EventuallyReads(*distributed.orchestrator,
                              "specd_num_requests_running\\{model=\"specd\"\\}", 0));
  EXPECT_THAT(SharedMemoryOf(distributed.verifier->pid()), ::testing::IsEmpty());
}

TEST(SpecdServeTest, KillingTheDrafterMidStreamFinishesRequestsTargetOnly) {
  Distributed distributed;
  ASSERT_TRUE(distributed.ok());
  const std::string ids = IdList(12, 4);
  grpc::ClientContext context;
  auto reader =
      Stub(distributed.orchestrator->address())->GenerateStream(&context, StreamRequest(ids, 120));
  std::vector<int64_t> got;
  v1::GenerateStreamResponse message;
  bool killed = false;
  while (reader->Read(&message)) {
    got.insert(got.end(), message.token_ids().begin(), message.token_ids().end());
    if (!killed) {
      distributed.drafter->Signal(SIGKILL);
      killed = true;
    }
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(got.size(), 120u);
  EXPECT_EQ(message.acceptance().num_target_only_steps() > 0, true);
  EXPECT_GE(Sample(Metrics(*distributed.orchestrator),
                   "specd_drafter_fallbacks_total\\{model=\"specd\"\\}"),
            1);
  // And new requests are served too, target-only.
  EXPECT_EQ(SpecctlIds(distributed.orchestrator->address(), ids), LocalIds(ids, false));
}

TEST(SpecdServeTest, ACancelledStreamFreesItsSessions) {
  Distributed distributed;
  ASSERT_TRUE(distributed.ok());
  grpc::ClientContext context;
  auto reader = Stub(distributed.orchestrator->address())
                    ->GenerateStream(&context, StreamRequest(IdList(12, 5), 2000));
  v1::GenerateStreamResponse message;
  ASSERT_TRUE(reader->Read(&message));
  EXPECT_TRUE(EventuallyReads(*distributed.verifier, "specd_verifier_open_sessions", 1));
  EXPECT_GT(Sample(Metrics(*distributed.verifier), "specd_cache_memory_used_bytes"), 0);
  EXPECT_EQ(Sample(Metrics(*distributed.verifier), "specd_cache_sequences"), 1);
  context.TryCancel();
  while (reader->Read(&message)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(EventuallyReads(*distributed.verifier, "specd_verifier_open_sessions", 0));
  EXPECT_TRUE(EventuallyReads(*distributed.drafter, "specd_drafter_open_sessions", 0));
  EXPECT_TRUE(EventuallyReads(*distributed.verifier, "specd_cache_memory_used_bytes", 0));
  EXPECT_TRUE(EventuallyReads(*distributed.drafter, "specd_cache_memory_used_bytes", 0));
}

TEST(SpecdServeTest, BadInputIsAnsweredWithTheContractsCodes) {
  std::unique_ptr<ServerProcess> all =
      Serve({"--role", "all", "--model", Target(), "--drafter", Drafter()});
  ASSERT_NE(all, nullptr);
  const struct {
    std::vector<std::string> args;
    const char* error;
  } cases[] = {
      {{"generate", "--ids", "1,2,100000"}, "INVALID_ARGUMENT: prompt: token id 100000"},
      {{"generate", "--ids", "1,2", "--temperature", "-1"},
       "INVALID_ARGUMENT: sampling.temperature"},
      {{"generate", "--ids", "1,2", "--max-new-tokens", "100000"},
       "INVALID_ARGUMENT: sampling.max_new_tokens"},
      {{"generate", "hello"}, "INVALID_ARGUMENT: prompt: this server has no tokenizer"},
      {{"health", "--service", "no.such.Service"}, "NOT_FOUND"},
  };
  for (const auto& bad : cases) {
    const ProcessResult run = Specctl(all->address(), bad.args);
    EXPECT_EQ(run.exit_code, 1) << bad.args[0];
    EXPECT_THAT(run.err, HasSubstr(bad.error));
  }
  const ProcessResult unreachable = Specctl("127.0.0.1:1", {"generate", "--ids", "1"});
  EXPECT_EQ(unreachable.exit_code, 1);
  EXPECT_THAT(unreachable.err, HasSubstr("specctl: UNAVAILABLE"));
}

TEST(SpecdServeTest, WithAnApiKeyGenerationNeedsItAndHealthDoesNot) {
  const ::specd::testing::TempDir dir;
  std::ofstream(dir.path() / "key") << "sesame\n";
  std::unique_ptr<ServerProcess> all =
      Serve({"--role", "all", "--model", Target(), "--drafter", Drafter(), "--api-key-file",
             (dir.path() / "key").string()});
  ASSERT_NE(all, nullptr);
  for (const std::vector<std::string>& refused :
       {std::vector<std::string>{"generate", "--ids", "1,2,3"},
        std::vector<std::string>{"--api-key", "open", "generate", "--ids", "1,2,3"}}) {
    const ProcessResult run = Specctl(all->address(), refused);
    EXPECT_EQ(run.exit_code, 1);
    EXPECT_THAT(run.err, HasSubstr("specctl: UNAUTHENTICATED"));
  }
  const ProcessResult keyed = Specctl(all->address(), {"--api-key", "sesame", "generate", "--ids",
                                                       "1,2,3", "--max-new-tokens", "4"});
  EXPECT_EQ(keyed.exit_code, 0) << keyed.err;
  EXPECT_EQ(Specctl(all->address(), {"health"}).exit_code, 0);
}

TEST(SpecdServeTest, OverTlsClientsNeedTheAuthorityAndMutualTlsAdmitsOnlyCertifiedRoles) {
  const ::specd::testing::TempDir dir;
  const ::specd::testing::TestCertificates tls = ::specd::testing::MakeTestCertificates(dir.path());
  const std::vector<std::string> serve_tls = {"--tls-cert", tls.cert.string(), "--tls-key",
                                              tls.key.string()};
  // A verifier that takes only clients with a certificate of the authority.
  std::vector<std::string> verifier_args = {"--role", "verifier",        "--model",
                                            Target(), "--tls-client-ca", tls.ca.string()};
  verifier_args.insert(verifier_args.end(), serve_tls.begin(), serve_tls.end());
  std::unique_ptr<ServerProcess> verifier = Serve(verifier_args);
  ASSERT_NE(verifier, nullptr);
  const std::vector<std::string> trusting = {"--tls-ca", tls.ca.string()};
  std::vector<std::string> certified = trusting;
  certified.insert(certified.end(), serve_tls.begin(), serve_tls.end());
  const auto health = [&](const std::string& address, std::vector<std::string> client) {
    client.push_back("health");
    return Specctl(address, client);
  };
  EXPECT_THAT(health(verifier->address(), {}).err, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(health(verifier->address(), trusting).err, HasSubstr("UNAVAILABLE"));
  EXPECT_EQ(health(verifier->address(), certified).exit_code, 0);

  // Its orchestrator presents the certificate, and serves gRPC and the HTTP API over TLS.
  std::vector<std::string> orchestrator_args = {
      "--role", "orchestrator", "--verifier-addr", verifier->address(), "--http-port", "0"};
  orchestrator_args.insert(orchestrator_args.end(), certified.begin(), certified.end());
  std::unique_ptr<ServerProcess> orchestrator = Serve(orchestrator_args);
  ASSERT_NE(orchestrator, nullptr);
  std::vector<std::string> generate = trusting;
  generate.insert(generate.end(), {"generate", "--ids", "1,2,3", "--max-new-tokens", "4"});
  const ProcessResult generated = Specctl(orchestrator->address(), generate);
  EXPECT_EQ(generated.exit_code, 0) << generated.err;
  EXPECT_THAT(Specctl(orchestrator->address(), {"generate", "--ids", "1,2,3"}).err,
              HasSubstr("UNAVAILABLE"));
  const std::string models =
      "https://127.0.0.1:" + std::to_string(orchestrator->http_port()) + "/v1/models";
  const ProcessResult https = RunProcess({"curl", "-sS", "--cacert", tls.ca.string(), "-o",
                                          "/dev/null", "-w", "%{http_code}", models});
  EXPECT_EQ(https.out, "200") << https.err;
  EXPECT_NE(RunProcess({"curl", "-sS", models}).exit_code, 0);  // an unknown authority
}

// As on Kubernetes: a pair's certificate names its Service, while the orchestrator reaches the
// pair by the pod address the Service's DNS gave it.
TEST(SpecdServeTest, TlsServerNameChecksAServerReachedByAddressAgainstAName) {
  const ::specd::testing::TempDir dir;
  const ::specd::testing::TestCertificates tls =
      ::specd::testing::MakeTestCertificates(dir.path(), "DNS:specd-pairs.specd.svc");
  std::unique_ptr<ServerProcess> verifier =
      Serve({"--role", "verifier", "--model", Target(), "--tls-cert", tls.cert.string(),
             "--tls-key", tls.key.string()});
  ASSERT_NE(verifier, nullptr);
  const ProcessResult by_address =
      Specctl(verifier->address(), {"--tls-ca", tls.ca.string(), "health"});
  EXPECT_THAT(by_address.err, HasSubstr("UNAVAILABLE"));
  const std::vector<std::string> named = {"--tls-ca", tls.ca.string(), "--tls-server-name",
                                          "specd-pairs.specd.svc"};
  std::vector<std::string> health = named;
  health.push_back("health");
  EXPECT_EQ(Specctl(verifier->address(), health).exit_code, 0);
  EXPECT_THAT(Specctl(verifier->address(), {"--tls-server-name", "x", "health"}).err,
              HasSubstr("--tls-server-name needs --tls-ca"));

  std::vector<std::string> orchestrator_args = {"--role", "orchestrator", "--verifier-addr",
                                                verifier->address()};
  orchestrator_args.insert(orchestrator_args.end(), named.begin(), named.end());
  std::unique_ptr<ServerProcess> orchestrator = Serve(orchestrator_args);
  ASSERT_NE(orchestrator, nullptr);
  const ProcessResult generated =
      Specctl(orchestrator->address(), {"generate", "--ids", "1,2,3", "--max-new-tokens", "4"});
  EXPECT_EQ(generated.exit_code, 0) << generated.err;
}

TEST(SpecdServeTest, AKilledVerifierLeavesNothingInSharedMemory) {
  Distributed distributed;
  ASSERT_TRUE(distributed.ok());
  grpc::ClientContext context;
  auto reader = Stub(distributed.orchestrator->address())
                    ->GenerateStream(&context, StreamRequest(IdList(12, 6), 2000));
  v1::GenerateStreamResponse message;
  ASSERT_TRUE(reader->Read(&message));
  const pid_t verifier = distributed.verifier->pid();
  EXPECT_THAT(SharedMemoryOf(verifier), ::testing::SizeIs(1));
  distributed.verifier->Signal(SIGKILL);
  distributed.verifier->Wait();
  for (int i = 0; i < 100 && !SharedMemoryOf(verifier).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_THAT(SharedMemoryOf(verifier), ::testing::IsEmpty());
  // The request fails with UNAVAILABLE: the verifier is the one process the output needs.
  while (reader->Read(&message)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST(SpecdServeTest, SigtermDrainsRunningRequestsThenExits) {
  std::unique_ptr<ServerProcess> all = Serve(
      {"--role", "all", "--model", Target(), "--drafter", Drafter(), "--shutdown-timeout", "60"});
  ASSERT_NE(all, nullptr);
  grpc::ClientContext context;
  auto reader = Stub(all->address())->GenerateStream(&context, StreamRequest(IdList(8, 7), 300));
  v1::GenerateStreamResponse message;
  ASSERT_TRUE(reader->Read(&message));
  all->Signal(SIGTERM);
  int tokens = message.token_ids_size();
  while (reader->Read(&message)) tokens += message.token_ids_size();
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(tokens, 300);
  EXPECT_EQ(all->Wait(), 0) << all->log();
}

// The series of an instant PromQL query: label `by` → value (none while it fails).
std::map<std::string, double> Query(const PrometheusServer& prometheus, const std::string& promql,
                                    const std::string& by) {
  std::map<std::string, double> series;
  absl::StatusOr<nlohmann::json> result = prometheus.Query(promql);
  if (!result.ok()) return series;
  for (const nlohmann::json& item : *result) {
    series[item["metric"].value(by, "")] = std::stod(item["value"][1].get<std::string>());
  }
  return series;
}

TEST(SpecdServeTest, PrometheusScrapesEveryServiceAndAnswersPerRegimeQueries) {
  // Every step drafts, so every regime has a τ: the guard would serve this random drafter
  // target-only.
  Distributed distributed({"--no-speculation-guard"});
  ASSERT_TRUE(distributed.ok());
  // The orchestrator's regimes here: short < 16 ≤ medium < 48 ≤ long prompt tokens.
  for (const int length : {8, 24, 60}) {
    EXPECT_EQ(SpecctlIds(distributed.orchestrator->address(), IdList(length, length)).size(),
              kNewTokens);
  }
  std::string error;
  std::unique_ptr<PrometheusServer> prometheus = PrometheusServer::Start(
      absl::StrCat("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                   "scrape_configs:\n"
                   "  - job_name: specd\n"
                   "    static_configs:\n"
                   "      - targets: ['127.0.0.1:",
                   distributed.verifier->metrics_port(),
                   "', '127.0.0.1:", distributed.drafter->metrics_port(),
                   "', '127.0.0.1:", distributed.orchestrator->metrics_port(), "']\n"),
      {}, error);
  ASSERT_NE(prometheus, nullptr) << error;
  const std::string tau =
      "1 + sum by (regime) (specd_spec_decode_num_accepted_tokens_total) / sum by (regime) "
      "(specd_spec_decode_num_drafts_total)";
  const std::string ttft_p95 =
      "histogram_quantile(0.95, sum by (le, regime) (specd_time_to_first_token_seconds_bucket))";
  std::map<std::string, double> up, taus, ttfts;
  for (int i = 0; i < 120 && (up.size() < 3 || taus.size() < 3 || ttfts.size() < 3); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    up = Query(*prometheus, "up == 1", "instance");
    taus = Query(*prometheus, tau, "regime");
    ttfts = Query(*prometheus, ttft_p95, "regime");
  }
  EXPECT_EQ(up.size(), 3u) << "every service is scraped";
  for (const char* regime : {"short", "medium", "long"}) {
    ASSERT_TRUE(taus.contains(regime)) << regime;
    EXPECT_GE(taus[regime], 1) << regime;
    ASSERT_TRUE(ttfts.contains(regime)) << regime;
    EXPECT_GT(ttfts[regime], 0) << regime;
  }
}

TEST(SpecdServeTest, AnOrchestratorSpreadsRequestsOverEveryPairItIsGiven) {
  // Two pairs on two loopback addresses with the same ports, as pods behind a headless Service.
  const std::string verifier_port = std::to_string(FreePort());
  const std::string drafter_port = std::to_string(FreePort());
  std::vector<std::unique_ptr<ServerProcess>> pairs;
  for (const char* host : {"127.0.0.1", "127.0.0.2"}) {
    for (std::vector<std::string> role :
         {std::vector<std::string>{"--role", "verifier", "--model", Target(), "--port",
                                   verifier_port},
          std::vector<std::string>{"--role", "drafter", "--drafter", Drafter(), "--target",
                                   Target(), "--port", drafter_port}}) {
      role.insert(role.begin(), {SPECD_BINARY, "serve", "--host", host, "--metrics-port", "0"});
      std::string error;
      pairs.push_back(ServerProcess::Start(role, error));
      ASSERT_NE(pairs.back(), nullptr) << error;
    }
  }
  std::unique_ptr<ServerProcess> orchestrator =
      Serve({"--role", "orchestrator", "--pairs", "127.0.0.1,127.0.0.2", "--verifier-port",
             verifier_port, "--drafter-port", drafter_port, "--pairs-refresh", "1"});
  ASSERT_NE(orchestrator, nullptr);
  const std::string ids = IdList(12, 3);
  const std::vector<int64_t> local = LocalIds(ids, /*with_drafter=*/false);
  std::vector<std::vector<int64_t>> served(4);
  {
    std::vector<std::thread> clients;
    for (auto& out : served) {
      clients.emplace_back(
          [&] { out = SpecctlIds(orchestrator->address(), ids, /*stream=*/true); });
    }
    for (std::thread& client : clients) client.join();
  }
  for (const std::vector<int64_t>& out : served) EXPECT_EQ(out, local);
  // Both pairs prefilled and drafted: each verifier's drafter is its own host's.
  for (size_t i = 0; i < pairs.size(); ++i) {
    const std::string host = i < 2 ? "127.0.0.1" : "127.0.0.2";
    const std::regex served_ok("grpc_method=\"(Prefill|Draft)\".*\\} [1-9]");
    std::istringstream lines(Metrics(*pairs[i], host));
    bool found = false;
    for (std::string line; std::getline(lines, line);) {
      found |=
          line.find("grpc_code=\"OK\"") != std::string::npos && std::regex_search(line, served_ok);
    }
    EXPECT_TRUE(found) << host << " process " << i << " served no session";
  }
}

TEST(SpecdServeTest, AnOrchestratorStartedFirstWaitsNotServingForItsVerifier) {
  // As an init system or a compose file may start them: the orchestrator before its pair.
  const std::string verifier_port = std::to_string(FreePort());
  std::unique_ptr<ServerProcess> orchestrator =
      Serve({"--role", "orchestrator", "--verifier-addr", "127.0.0.1:" + verifier_port,
             "--pairs-refresh", "1"});
  ASSERT_NE(orchestrator, nullptr);
  const std::string ids = IdList(12, 4);
  const ProcessResult waiting = Specctl(orchestrator->address(), {"health"});
  EXPECT_EQ(waiting.out, "NOT_SERVING\n") << waiting.err;
  const ProcessResult early = Specctl(
      orchestrator->address(), {"generate", "--ids", ids, "--max-new-tokens", "4", "--json"});
  EXPECT_NE(early.exit_code, 0);
  EXPECT_THAT(early.err, HasSubstr("UNAVAILABLE"));

  std::string error;
  std::unique_ptr<ServerProcess> verifier =
      ServerProcess::Start({SPECD_BINARY, "serve", "--host", "127.0.0.1", "--port", verifier_port,
                            "--role", "verifier", "--model", Target()},
                           error);
  ASSERT_NE(verifier, nullptr) << error;
  bool serving = false;
  for (int i = 0; i < 100 && !serving; ++i) {
    serving = Specctl(orchestrator->address(), {"health"}).exit_code == 0;
    if (!serving) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(serving) << orchestrator->log();
  EXPECT_TRUE(orchestrator->running());
  EXPECT_EQ(SpecctlIds(orchestrator->address(), ids), LocalIds(ids, /*with_drafter=*/false));
}

TEST(SpecdServeTest, AJobSubmittedWithSpecctlRunsTheSmokePipelineToSuccess) {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("specd_trainer_" + std::to_string(getpid()));
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  std::unique_ptr<ServerProcess> trainer =
      Serve({"--role", "trainer", "--work-root", (root / "work").string()});
  ASSERT_NE(trainer, nullptr);
  std::ofstream(root / "smoke.yaml") << "preset: smoke\n";
  const ProcessResult submitted =
      Specctl(trainer->address(), {"jobs", "submit", "pipeline", "--config",
                                   (root / "smoke.yaml").string(), "--submission-id", "smoke-1"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const ProcessResult listed = Specctl(trainer->address(), {"jobs", "list", "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  const nlohmann::json jobs = nlohmann::json::parse(listed.out);
  ASSERT_EQ(jobs["jobs"].size(), 1u) << listed.out;
  const std::string job_id = jobs["jobs"][0]["jobId"];
  // Following the log ends when the job does.
  const ProcessResult logs = Specctl(trainer->address(), {"jobs", "logs", job_id, "--follow"});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_THAT(logs.out, HasSubstr("== pipeline: evaluate"));
  EXPECT_THAT(logs.out, HasSubstr("ended (exit status 0)"));
  const ProcessResult job = Specctl(trainer->address(), {"jobs", "get", job_id, "--json"});
  ASSERT_EQ(job.exit_code, 0) << job.err;
  EXPECT_EQ(nlohmann::json::parse(job.out)["state"], "JOB_STATE_SUCCEEDED") << job.out;
  trainer.reset();
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace specd
