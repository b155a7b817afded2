// `specd serve --role verifier|drafter|orchestrator|trainer|all`: one process of the serving
// system. Each role is a handler library behind its gRPC service; `all` is the embedded default,
// the verifier, drafter and orchestrator handlers in one process, the orchestrator's requests
// running on the engine's in-process ports (no shared memory; the other two services answer
// outside callers). Every role serves grpc.health.v1 and reflection, and /metrics on
// --metrics-port; SIGTERM or SIGINT drains it (--shutdown-timeout) and stops it.
#include <fcntl.h>
#include <poll.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "cli/specd/commands.h"
#include "cli/specd/model_options_flags.h"
#include "common/engine/in_process_ports.h"
#include "common/io/qwen35_checkpoint_config.h"
#include "common/metrics/http_endpoint.h"
#include "common/model/qwen35_model.h"
#include "common/model/token_head.h"
#include "common/rpc/api_key.h"
#include "common/rpc/grpc_server.h"
#include "common/rpc/resolve_hosts.h"
#include "common/rpc/shared_memory_region.h"
#include "common/rpc/tls.h"
#include "common/text/tokenizer.h"
#include "nlohmann/json.hpp"
#include "services/drafter/drafter_grpc.h"
#include "services/drafter/drafter_handler.h"
#include "services/drafter/served_drafter.h"
#include "services/openai/openai_server.h"
#include "services/orchestrator/generation_grpc.h"
#include "services/orchestrator/generation_handler.h"
#include "services/shared_weights/shared_token_head.h"
#include "services/trainer/service/trainer_server.h"
#include "services/verifier/verifier_grpc.h"
#include "services/verifier/verifier_handler.h"

namespace specd::cli {
namespace {

struct ServeFlags {
  std::string role;
  std::string host = "0.0.0.0";
  int port = 50051;
  int metrics_port = -1;  // none
  int http_port = -1;     // orchestrator, all: the OpenAI HTTP API; -1: none
  std::string api_key;    // the public APIs' key; empty: --api-key-file, then SPECD_API_KEY
  std::string api_key_file;
  rpc::TlsFiles tls;  // serving gRPC and HTTP; connecting (orchestrator): ca, and cert for mTLS
  double shutdown_timeout_s = 10;
  // verifier
  std::string model;
  std::vector<int64_t> tap_layers;
  int64_t max_sessions = 64;
  int64_t max_session_length = 4096;
  int64_t max_block_size = 16;
  double session_idle_timeout_s = 60;
  // verifier, drafter: continuous batching
  int64_t max_batch_tokens = 2048;
  int64_t max_batch = 64;
  int64_t batch_delay_us = 2000;
  // verifier, drafter: the caches' memory
  int64_t cache_memory = 0;  // bytes; 0: engine::DefaultCacheBudget() once the weights are loaded
  int64_t cache_block_tokens = 16;
  // verifier, drafter: AddModelOptions' flags
  model::ModelOptions model_options;
  // drafter
  std::string drafter;
  std::string target;
  int64_t window = 0;
  // orchestrator
  std::string verifier_addr;
  std::string drafter_addr;
  std::string pairs;
  int verifier_port = 50051;
  int drafter_port = 50052;
  double pairs_refresh_s = 10;
  std::string tokenizer;
  std::string model_name = "specd";
  int64_t max_running = 64;  // --max-batch's default: every running request in each forward
  int64_t max_waiting = 64;
  int64_t block_size = 0;
  bool speculation_guard = true;
  std::string draft_acceptance = "match";
  double call_timeout_s = 60;
  // trainer
  std::string work_root = "runs/trainer";
  std::vector<std::string> allowed_roots;
  int max_running_jobs = 1;
  int64_t regime_medium_from = engine::RegimeThresholds().medium_from;
  int64_t regime_long_from = engine::RegimeThresholds().long_from;
};

// A byte per SIGTERM/SIGINT; the main thread waits on the other end. (A handler rather than
// sigwait: threads LibTorch or gRPC started before the mask was set would still take signals.)
int stop_pipe[2] = {-1, -1};

void OnStopSignal(int) {
  const char byte = 1;
  (void)!write(stop_pipe[1], &byte, 1);
}

absl::Status InstallStopHandler() {
  // Close-on-exec: the trainer's job processes must not hold the server's stop pipe.
  if (pipe2(stop_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError("cannot create the signal pipe");
  }
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  return absl::OkStatus();
}

void WaitForStopSignal() {
  char byte = 0;
  while (read(stop_pipe[0], &byte, 1) < 0 && errno == EINTR) {
  }
}

// True when a stop signal comes within `timeout`.
bool StopSignalWithin(absl::Duration timeout) {
  pollfd fd = {.fd = stop_pipe[0], .events = POLLIN, .revents = 0};
  return poll(&fd, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) > 0;
}

// "w4a16" when the checkpoint's config.json carries a quantization_config, else "dense".
std::string QuantizationOf(const std::filesystem::path& dir) {
  std::ifstream file(dir / "config.json");
  const nlohmann::json config = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  return config.is_object() && config.contains("quantization_config") ? "w4a16" : "dense";
}

absl::Duration Seconds(double seconds) { return absl::Milliseconds(seconds * 1000); }

// What one process serves and everything its services need alive while it does.
struct Role {
  std::optional<model::Qwen35Model> target;
  std::optional<text::Tokenizer> tokenizer;
  std::unique_ptr<engine::CachePool> cache_pool;  // before the sessions' owners: outlives them
  // Every batcher of the process's models: one device, one forward at a time.
  std::shared_ptr<engine::DeviceTurns> turns = std::make_shared<engine::DeviceTurns>();
  std::shared_ptr<verifier::VerifierHandler> verifier;
  std::shared_ptr<drafter::DrafterHandler> drafter;
  std::unique_ptr<orchestrator::BackendPool>
      backends;  // the orchestrator's verifier + drafter pairs
  std::unique_ptr<orchestrator::GenerationHandler> generation;
  std::unique_ptr<trainer::TrainerServer> trainer;
  std::vector<std::unique_ptr<grpc::Service>> services;
  std::vector<std::string> health_names;
};

absl::Status RequireFlags(const std::vector<std::pair<const char*, const std::string*>>& flags,
                          const std::string& role) {
  for (const auto& [name, value] : flags) {
    if (value->empty())
      return absl::InvalidArgumentError(absl::StrCat("--role ", role, " needs ", name));
  }
  return absl::OkStatus();
}

// A gauge without labels, registered once however often it is asked for.
prometheus::Gauge& AddGauge(prometheus::Registry& registry, const std::string& name,
                            const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

// 1, 2, 4, ... up to `largest`, a power of two.
prometheus::Histogram::BucketBoundaries PowersOfTwo(int largest) {
  prometheus::Histogram::BucketBoundaries bounds;
  for (int bound = 1; bound <= largest; bound *= 2) bounds.push_back(bound);
  return bounds;
}

// The batching flags, and the histograms of the forwards of `model`'s batchers, "verifier" (the
// target) or "drafter" (vLLM's iteration_tokens_total), taking the process's turns.
engine::BatchingOptions BatchingOf(const ServeFlags& flags, prometheus::Registry& registry,
                                   const std::string& model, const Role& role) {
  prometheus::Histogram& rows = prometheus::BuildHistogram()
                                    .Name("specd_iteration_tokens")
                                    .Help("Rows (tokens) per batched forward.")
                                    .Register(registry)
                                    .Add({{"role", model}}, PowersOfTwo(8192));
  prometheus::Histogram& sequences = prometheus::BuildHistogram()
                                         .Name("specd_iteration_sequences")
                                         .Help("Sequences per batched forward.")
                                         .Register(registry)
                                         .Add({{"role", model}}, PowersOfTwo(256));
  return {.max_rows = flags.max_batch_tokens,
          .max_sequences = flags.max_batch,
          .max_delay = std::chrono::microseconds(flags.batch_delay_us),
          .on_step =
              [&rows, &sequences](int64_t batch, int64_t tokens) {
                sequences.Observe(static_cast<double>(batch));
                rows.Observe(static_cast<double>(tokens));
              },
          .turns = role.turns};
}

// The process's cache pool, made by the first role that needs one (after its weights are loaded,
// so that the default budget counts only what they left), with its gauges.
absl::StatusOr<engine::CachePool*> CachePoolOf(const ServeFlags& flags,
                                               prometheus::Registry& registry, Role& role) {
  if (role.cache_pool != nullptr) return role.cache_pool.get();
  prometheus::Gauge* capacity =
      &AddGauge(registry, "specd_cache_memory_capacity_bytes", "The caches' memory budget.");
  prometheus::Gauge* used = &AddGauge(registry, "specd_cache_memory_used_bytes",
                                      "Cache memory reserved by open sessions.");
  prometheus::Gauge* usage =
      &AddGauge(registry, "specd_cache_memory_usage_perc",
                "Cache memory reserved, as a fraction of the budget (0 to 1).");
  prometheus::Gauge* sequences = &AddGauge(registry, "specd_cache_sequences",
                                           "Sessions holding cache memory (target and drafter).");
  prometheus::Gauge* waiting =
      &AddGauge(registry, "specd_cache_waiting", "Sessions waiting for cache memory.");
  absl::StatusOr<std::unique_ptr<engine::CachePool>> pool = engine::CachePool::Create(
      {.budget_bytes = flags.cache_memory > 0 ? flags.cache_memory : engine::DefaultCacheBudget(),
       .block_tokens = flags.cache_block_tokens,
       .max_waiting = flags.max_waiting},
      [=](const engine::CachePoolUse& use) {
        capacity->Set(static_cast<double>(use.capacity_bytes));
        used->Set(static_cast<double>(use.used_bytes));
        usage->Set(static_cast<double>(use.used_bytes) / static_cast<double>(use.capacity_bytes));
        sequences->Set(static_cast<double>(use.sequences));
        waiting->Set(static_cast<double>(use.waiting));
      });
  if (!pool.ok()) return pool.status();
  role.cache_pool = *std::move(pool);
  return role.cache_pool.get();
}

// What the pool holds of sessions of `footprint` as long as the verifier allows.
void ReportCapacity(const ServeFlags& flags, const engine::CachePool& pool, const char* what,
                    const model::CacheFootprint& footprint) {
  const int64_t session = pool.BytesFor(footprint, flags.max_session_length);
  std::cerr << "specd serve: cache memory " << pool.use().capacity_bytes / (1 << 20) << " MiB; a "
            << what << " session of " << flags.max_session_length << " tokens takes "
            << session / (1 << 20) << " MiB, so " << pool.use().capacity_bytes / session
            << " such sessions fit at once" << std::endl;
}

absl::Status AddVerifier(const ServeFlags& flags, prometheus::Registry& registry, Role& role) {
  absl::StatusOr<model::Qwen35Model> target =
      model::Qwen35Model::Load(flags.model, flags.model_options);
  if (!target.ok()) return target.status();
  role.target.emplace(*std::move(target));
  absl::StatusOr<engine::CachePool*> pool = CachePoolOf(flags, registry, role);
  if (!pool.ok()) return pool.status();
  ReportCapacity(flags, **pool, "target", role.target->SequenceFootprint());
  prometheus::Gauge& open_sessions =
      AddGauge(registry, "specd_verifier_open_sessions", "Verifier sessions open now.");
  absl::StatusOr<std::unique_ptr<verifier::VerifierHandler>> handler =
      verifier::VerifierHandler::Create(
          *role.target, {.model_name = flags.model,
                         .quantization = QuantizationOf(flags.model),
                         .tapped_layer_ids = flags.tap_layers,
                         .max_sessions = flags.max_sessions,
                         .max_session_length = flags.max_session_length,
                         .max_block_size = flags.max_block_size,
                         .session_idle_timeout = Seconds(flags.session_idle_timeout_s),
                         .open_sessions = &open_sessions,
                         .batching = BatchingOf(flags, registry, "verifier", role),
                         .cache_pool = *pool});
  if (!handler.ok()) return handler.status();
  role.verifier = *std::move(handler);
  role.services.push_back(std::make_unique<verifier::VerifierGrpcService>(*role.verifier));
  role.health_names.push_back("specd.v1.TargetVerifierService");
  return absl::OkStatus();
}

// The embedding and head the verifier at --verifier-addr shares from its GPU, mapped; the verifier
// is waited for up to --call-timeout (processes may start in any order).
absl::StatusOr<model::TokenHead> VerifierTokenHead(const ServeFlags& flags,
                                                   const io::Qwen35TextConfig& config) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      rpc::ChannelCredentialsOf(flags.tls);
  if (!credentials.ok()) return credentials.status();
  const absl::Time deadline = absl::Now() + Seconds(flags.call_timeout_s);
  verifier::GrpcVerifierClient client(
      rpc::Connect(flags.verifier_addr, *credentials, flags.tls.server_name),
      Seconds(flags.call_timeout_s));
  absl::StatusOr<v1::TargetVerifierServiceInfoResponse> info = client.Info();
  while (absl::IsUnavailable(info.status()) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(500));
    info = client.Info();
  }
  if (!info.ok()) {
    return absl::Status(info.status().code(), absl::StrCat("--verifier-addr ", flags.verifier_addr,
                                                           ": ", info.status().message()));
  }
  return shared_weights::MapTokenHead(info->shared_weights(), config, flags.model_options);
}

// The drafter --drafter names, for the target in `target_dir`. A DFlash drafter drafts through
// the target's embedding and head: in process, the verifier's own tensors; with --verifier-addr,
// those the verifier shares from its GPU; otherwise the two tensors read from the target
// checkpoint.
absl::Status AddDrafter(const ServeFlags& flags, const std::string& target_dir,
                        prometheus::Registry& registry, Role& role) {
  absl::StatusOr<io::Qwen35CheckpointConfig> target_config =
      io::ReadQwen35CheckpointConfig(target_dir);
  if (!target_config.ok()) return target_config.status();
  const bool shares_weights = !role.target.has_value() && !flags.verifier_addr.empty();
  absl::StatusOr<drafter::ServedDrafter> served =
      drafter::OpenServedDrafter(flags.drafter, target_config->text, flags.model_options,
                                 [&]() -> absl::StatusOr<model::TokenHead> {
                                   if (role.target.has_value()) return role.target->token_head();
                                   if (shares_weights)
                                     return VerifierTokenHead(flags, target_config->text);
                                   return model::TokenHead::Load(target_dir);
                                 });
  if (!served.ok()) return served.status();
  absl::StatusOr<engine::CachePool*> pool = CachePoolOf(flags, registry, role);
  if (!pool.ok()) return pool.status();
  ReportCapacity(flags, **pool, "drafter", served->drafter->SessionFootprint());
  prometheus::Gauge& open_sessions =
      AddGauge(registry, "specd_drafter_open_sessions", "Drafter sessions open now.");
  const std::string quantization =
      served->checkpoint.empty() ? "" : QuantizationOf(served->checkpoint);
  absl::StatusOr<std::unique_ptr<drafter::DrafterHandler>> handler =
      drafter::DrafterHandler::Create(
          *std::move(served), target_config->text,
          {.model_name = flags.drafter,
           .quantization = quantization,
           .default_window = flags.window,
           .max_sessions = flags.max_sessions,
           .session_idle_timeout = Seconds(flags.session_idle_timeout_s),
           .open_sessions = &open_sessions,
           .batching = BatchingOf(flags, registry, "drafter", role),
           .cache_pool = *pool,
           .uses_shared_weights = shares_weights && served->dflash != nullptr});
  if (!handler.ok()) return handler.status();
  role.drafter = *std::move(handler);
  role.services.push_back(std::make_unique<drafter::DrafterGrpcService>(*role.drafter));
  role.health_names.push_back("specd.v1.DrafterService");
  return absl::OkStatus();
}

// How the orchestrator reaches its pairs: plain text or TLS, and the name their certificates
// must carry (empty: the host connected to).
struct PairChannels {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  std::string server_name;
};

// The clients of a pair named `host`: its verifier at `verifier_addr`, its drafter at
// `drafter_addr` (none: target-only).
orchestrator::BackendPair ConnectPair(const std::string& host, const std::string& verifier_addr,
                                      const std::string& drafter_addr, absl::Duration timeout,
                                      const PairChannels& channels) {
  return orchestrator::BackendPair{
      .host = host,
      .verifier = std::make_shared<verifier::GrpcVerifierClient>(
          rpc::Connect(verifier_addr, channels.credentials, channels.server_name), timeout),
      .drafter = drafter_addr.empty()
                     ? nullptr
                     : std::make_shared<drafter::GrpcDrafterClient>(
                           rpc::Connect(drafter_addr, channels.credentials, channels.server_name),
                           timeout)};
}

// The orchestrator's pairs from its flags: --pairs hosts (discovered), or the one verifier (and
// drafter) at --verifier-addr (--drafter-addr), asked for now and every --pairs-refresh seconds:
// the order an init system or a compose file starts the processes in does not matter.
absl::StatusOr<std::unique_ptr<orchestrator::BackendPool>> RemotePairs(const ServeFlags& flags) {
  const absl::Duration timeout = Seconds(flags.call_timeout_s);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      rpc::ChannelCredentialsOf(flags.tls);
  if (!credentials.ok()) return credentials.status();
  const PairChannels channels{.credentials = *credentials, .server_name = flags.tls.server_name};
  orchestrator::BackendPool::Discover discover;
  orchestrator::BackendPool::Connect connect;
  if (flags.pairs.empty()) {
    discover = [host = flags.verifier_addr]() -> absl::StatusOr<std::vector<std::string>> {
      return std::vector<std::string>{host};
    };
    connect = [drafter_addr = flags.drafter_addr, timeout, channels](const std::string& host) {
      return ConnectPair(host, host, drafter_addr, timeout, channels);
    };
  } else {
    if (flags.pairs.starts_with("dns:")) {
      discover = [name = flags.pairs.substr(4)] { return rpc::ResolveHosts(name); };
    } else {
      const std::vector<std::string> hosts = absl::StrSplit(flags.pairs, ',', absl::SkipEmpty());
      discover = [hosts]() -> absl::StatusOr<std::vector<std::string>> { return hosts; };
    }
    connect = [verifier_port = flags.verifier_port, drafter_port = flags.drafter_port, timeout,
               channels](const std::string& host) {
      return ConnectPair(host, absl::StrCat(host, ":", verifier_port),
                         drafter_port == 0 ? "" : absl::StrCat(host, ":", drafter_port), timeout,
                         channels);
    };
  }
  std::unique_ptr<orchestrator::BackendPool> pool = orchestrator::BackendPool::Discovered(
      std::move(discover), connect, /*drafter_retry=*/absl::Seconds(5));
  if (absl::Status refreshed = pool->Refresh(); !refreshed.ok()) {
    std::cerr << "specd serve: " << refreshed.message() << "\n";
  }
  pool->RefreshEvery(Seconds(flags.pairs_refresh_s));
  return pool;
}

// Pairs load their checkpoints for minutes: waits for the first to join `pool` (which asks for
// them on its own thread) while health reports NOT_SERVING, so a startup probe covers the wait.
absl::Status WaitForFirstPair(const ServeFlags& flags, const orchestrator::BackendPool& pool,
                              grpc::Server& server) {
  std::cerr << "specd serve: waiting for a target verifier at "
            << (flags.pairs.empty() ? flags.verifier_addr : flags.pairs) << std::endl;
  while (!pool.target().has_value()) {
    if (StopSignalWithin(absl::Milliseconds(100))) {
      return absl::CancelledError("stopped before any target verifier answered");
    }
  }
  rpc::SetServing(server, true);
  std::cerr << "specd serve: a target verifier joined" << std::endl;
  return absl::OkStatus();
}

absl::Status AddOrchestrator(const ServeFlags& flags, const std::string& tokenizer_path,
                             prometheus::Registry& registry, Role& role) {
  if (!tokenizer_path.empty()) {
    absl::StatusOr<text::Tokenizer> tokenizer = text::Tokenizer::FromFile(tokenizer_path);
    if (!tokenizer.ok()) return tokenizer.status();
    role.tokenizer.emplace(*std::move(tokenizer));
  }
  absl::StatusOr<std::unique_ptr<orchestrator::GenerationHandler>> handler =
      orchestrator::GenerationHandler::Create(
          *role.backends, role.tokenizer.has_value() ? &*role.tokenizer : nullptr, registry,
          {.model_name = flags.model_name,
           .target_model = flags.role == "all"   ? flags.model
                           : flags.pairs.empty() ? flags.verifier_addr
                                                 : flags.pairs,
           .drafter_model = flags.role == "all"   ? flags.drafter
                            : flags.pairs.empty() ? flags.drafter_addr
                                                  : flags.pairs,
           .regimes = {.medium_from = flags.regime_medium_from,
                       .long_from = flags.regime_long_from},
           .max_running = flags.max_running,
           .max_waiting = flags.max_waiting,
           .max_stop_strings = 16,
           .default_block_size = flags.block_size,
           .default_draft_window = flags.window,
           .speculation_guard = flags.speculation_guard,
           .rejection_sampling = flags.draft_acceptance == "rejection-sampling",
           .chat_flavor = text::ChatFlavor::kQwen3_5});
  if (!handler.ok()) return handler.status();
  role.generation = *std::move(handler);
  role.services.push_back(std::make_unique<orchestrator::GenerationGrpcService>(
      *role.generation, rpc::ApiKey(flags.api_key)));
  role.health_names.push_back("specd.v1.GenerationService");
  return absl::OkStatus();
}

absl::Status BuildRole(const ServeFlags& flags, prometheus::Registry& registry, Role& role) {
  const std::string& name = flags.role;
  if (name == "verifier") {
    if (absl::Status ok = RequireFlags({{"--model", &flags.model}}, name); !ok.ok()) return ok;
    return AddVerifier(flags, registry, role);
  }
  if (name == "drafter") {
    if (absl::Status ok =
            RequireFlags({{"--drafter", &flags.drafter}, {"--target", &flags.target}}, name);
        !ok.ok()) {
      return ok;
    }
    return AddDrafter(flags, flags.target, registry, role);
  }
  if (name == "orchestrator") {
    if (flags.verifier_addr.empty() == flags.pairs.empty()) {
      return absl::InvalidArgumentError(
          "--role orchestrator needs either --verifier-addr (one pair) or --pairs");
    }
    absl::StatusOr<std::unique_ptr<orchestrator::BackendPool>> pairs = RemotePairs(flags);
    if (!pairs.ok()) return pairs.status();
    role.backends = *std::move(pairs);
    return AddOrchestrator(flags, flags.tokenizer, registry, role);
  }
  if (name == "trainer") {
    absl::StatusOr<std::unique_ptr<trainer::TrainerServer>> trainer =
        trainer::TrainerServer::Create(
            {.work_root = flags.work_root,
             .allowed_roots = {flags.allowed_roots.begin(), flags.allowed_roots.end()},
             .specd_binary = std::filesystem::read_symlink("/proc/self/exe"),
             .max_running_jobs = flags.max_running_jobs,
             .cancel_grace = absl::Seconds(10),
             .api_key = flags.api_key},
            registry);
    if (!trainer.ok()) return trainer.status();
    role.trainer = *std::move(trainer);
    role.health_names.push_back("specd.v1.TrainerService");
    return absl::OkStatus();
  }
  if (name == "all") {
    if (absl::Status ok = RequireFlags({{"--model", &flags.model}}, name); !ok.ok()) return ok;
    if (absl::Status ok = AddVerifier(flags, registry, role); !ok.ok()) return ok;
    if (!flags.drafter.empty()) {
      if (absl::Status ok = AddDrafter(flags, flags.model, registry, role); !ok.ok()) return ok;
    }
    const std::string tokenizer =
        text::Tokenizer::FileFor(flags.model, flags.tokenizer).value_or("").string();
    absl::StatusOr<std::unique_ptr<orchestrator::BackendPool>> pair =
        orchestrator::BackendPool::Fixed(
            {.host = "in-process",
             .verifier = role.verifier,
             .drafter = role.drafter,
             .in_process = std::make_shared<engine::InProcessPair>(
                 *role.target, role.drafter == nullptr ? nullptr : &role.drafter->drafter(),
                 engine::PairOptions{
                     .target_batching = BatchingOf(flags, registry, "verifier", role),
                     .draft_batching = BatchingOf(flags, registry, "drafter", role),
                     .cache_pool = role.cache_pool.get()})},
            absl::Seconds(5));
    if (!pair.ok()) return pair.status();
    role.backends = *std::move(pair);
    return AddOrchestrator(flags, tokenizer, registry, role);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--role ", name, " is not one of verifier, drafter, orchestrator, trainer, all"));
}

// The API key of --api-key, else of --api-key-file (its first line), else of SPECD_API_KEY;
// empty when none is given (the APIs are open).
absl::StatusOr<std::string> ApiKey(const ServeFlags& flags) {
  if (!flags.api_key.empty()) return flags.api_key;
  if (!flags.api_key_file.empty()) {
    std::ifstream file(flags.api_key_file);
    std::string key;
    if (!file || !std::getline(file, key)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--api-key-file ", flags.api_key_file, " cannot be read"));
    }
    key = std::string(absl::StripAsciiWhitespace(key));
    if (key.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--api-key-file ", flags.api_key_file, " holds no key"));
    }
    return key;
  }
  const char* from_environment = std::getenv("SPECD_API_KEY");
  return std::string(from_environment == nullptr ? "" : from_environment);
}

// The OpenAI HTTP API on the role's generation handler, when --http-port asks for it.
absl::StatusOr<std::unique_ptr<openai::OpenAiServer>> StartHttpApi(const ServeFlags& flags,
                                                                   Role& role) {
  if (flags.http_port < 0) return nullptr;
  if (role.generation == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http-port serves the generation API: --role orchestrator or all, not ", flags.role));
  }
  openai::OpenAiServerOptions api;
  api.http.host = flags.host;
  api.http.port = flags.http_port;
  api.http.threads = static_cast<int>(flags.max_running + flags.max_waiting) + 4;
  api.http.tls_cert = flags.tls.cert;
  api.http.tls_key = flags.tls.key;
  api.http.tls_client_ca = flags.tls.client_ca;
  api.model_name = flags.model_name;
  api.api_key = flags.api_key;
  return openai::OpenAiServer::Start(*role.generation,
                                     role.tokenizer.has_value() ? &*role.tokenizer : nullptr, api);
}

absl::Status Serve(ServeFlags flags) {
  if (absl::Status checked = flags.tls.Check(); !checked.ok()) return checked;
  absl::StatusOr<std::string> api_key = ApiKey(flags);
  if (!api_key.ok()) return api_key.status();
  flags.api_key = *std::move(api_key);  // from here on, the key whichever way it came
  if (absl::Status installed = InstallStopHandler(); !installed.ok()) return installed;
  // Before any thread starts: whatever ends this process, its shared memory goes with it.
  if (absl::Status reaper = rpc::StartSharedMemoryReaper(); !reaper.ok()) return reaper;
  prometheus::Registry registry;
  Role role;
  if (absl::Status built = BuildRole(flags, registry, role); !built.ok()) return built;
  std::unique_ptr<metrics::MetricsEndpoint> endpoint;
  if (flags.metrics_port >= 0) {
    absl::StatusOr<std::unique_ptr<metrics::MetricsEndpoint>> started =
        metrics::MetricsEndpoint::Start(registry, flags.host, flags.metrics_port);
    if (!started.ok()) return started.status();
    endpoint = *std::move(started);
  }
  absl::StatusOr<std::unique_ptr<openai::OpenAiServer>> http_api = StartHttpApi(flags, role);
  if (!http_api.ok()) return http_api.status();
  std::vector<grpc::Service*> services;
  for (const auto& service : role.services) services.push_back(service.get());
  if (role.trainer != nullptr) services.push_back(role.trainer->service());
  // Remote pairs have yet to join: the services listen, reporting NOT_SERVING until one does.
  const bool waiting = role.backends != nullptr && !role.backends->target().has_value();
  absl::StatusOr<rpc::GrpcServer> server =
      rpc::StartGrpcServer(absl::StrCat(flags.host, ":", flags.port), services, role.health_names,
                           registry, /*serving=*/!waiting, flags.tls);
  if (!server.ok()) return server.status();
  std::cerr << "specd serve: " << flags.role << " serving "
            << absl::StrJoin(role.health_names, ", ") << " on " << flags.host << ":"
            << server->port;
  if (endpoint != nullptr) std::cerr << ", metrics on :" << endpoint->port() << "/metrics";
  if (*http_api != nullptr) std::cerr << ", HTTP API on :" << (*http_api)->port();
  std::cerr << std::endl;
  if (waiting) {
    if (absl::Status joined = WaitForFirstPair(flags, *role.backends, *server->server);
        !joined.ok()) {
      return joined;
    }
  }

  WaitForStopSignal();
  std::cerr << "specd serve: draining (up to " << flags.shutdown_timeout_s << " s)" << std::endl;
  const absl::Duration drain = Seconds(flags.shutdown_timeout_s);
  rpc::SetServing(*server->server, false);
  if (role.generation != nullptr) role.generation->Shutdown(drain);
  http_api->reset();  // its requests have ended with the handler's
  if (role.trainer != nullptr) role.trainer->Shutdown();  // jobs resume at the next start
  server->server->Shutdown(absl::ToChronoTime(absl::Now() + drain));
  std::cerr << "specd serve: stopped" << std::endl;
  return absl::OkStatus();
}

}  // namespace

void AddServeCommand(CLI::App& app) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* serve = app.add_subcommand("serve", "serve one role of specd over gRPC");
  serve->add_option("--role", flags->role, "verifier, drafter, orchestrator, trainer or all")
      ->required();
  serve->add_option("--host", flags->host, "address to listen on")->capture_default_str();
  serve->add_option("--port", flags->port, "gRPC port (0: any free one)")->capture_default_str();
  serve->add_option("--metrics-port", flags->metrics_port,
                    "Prometheus /metrics port (0: any free one; default: none)");
  serve->add_option("--http-port", flags->http_port,
                    "orchestrator, all: the OpenAI-compatible HTTP API's port (/v1/completions, "
                    "/v1/chat/completions, /v1/models, /health; 0: any free one; default: none)");
  serve->add_option("--api-key", flags->api_key,
                    "orchestrator, trainer, all: the key the HTTP API and the generation and "
                    "trainer services require as `Authorization: Bearer` (visible to `ps`: "
                    "prefer --api-key-file or SPECD_API_KEY; default: none)");
  serve->add_option("--tls-cert", flags->tls.cert,
                    "every role: serve gRPC (and the HTTP API) over TLS with this PEM certificate "
                    "chain; an orchestrator also presents it to pairs that ask (mutual TLS)");
  serve->add_option("--tls-key", flags->tls.key, "every role: the PEM private key of --tls-cert");
  serve->add_option("--tls-client-ca", flags->tls.client_ca,
                    "every role: accept only clients whose certificate these PEM roots sign "
                    "(mutual TLS, e.g. verifiers and drafters taking only their orchestrators)");
  serve->add_option("--tls-ca", flags->tls.ca,
                    "orchestrator: the PEM roots of the verifiers' and drafters' certificates "
                    "(connect over TLS; default: plain text)");
  serve->add_option("--tls-server-name", flags->tls.server_name,
                    "orchestrator, with --tls-ca: the name the verifiers' and drafters' "
                    "certificates must carry, e.g. the Service whose DNS --pairs reads them from "
                    "(pod addresses change; default: the host connected to)");
  serve->add_option("--api-key-file", flags->api_key_file,
                    "orchestrator, trainer, all: a file whose first line is the API key");
  serve
      ->add_option("--shutdown-timeout", flags->shutdown_timeout_s,
                   "seconds a SIGTERM lets running requests finish")
      ->capture_default_str();
  serve->add_option("--model", flags->model, "verifier, all: the target checkpoint directory");
  serve
      ->add_option("--tap-layers", flags->tap_layers,
                   "verifier: layers tapped when a Prefill names none")
      ->delimiter(',');
  serve->add_option("--max-sessions", flags->max_sessions, "verifier, drafter: open sessions")
      ->capture_default_str();
  serve
      ->add_option("--max-session-length", flags->max_session_length,
                   "verifier: longest session (prompt + new tokens)")
      ->capture_default_str();
  serve->add_option("--max-block-size", flags->max_block_size, "verifier: longest verify block")
      ->capture_default_str();
  serve
      ->add_option(
          "--max-batch-tokens", flags->max_batch_tokens,
          "verifier, drafter: tokens per batched forward (decode rows, then prefill chunks)")
      ->capture_default_str();
  serve
      ->add_option("--max-batch", flags->max_batch,
                   "verifier, drafter: sequences per batched forward (1: no batching)")
      ->capture_default_str();
  serve
      ->add_option("--batch-delay-us", flags->batch_delay_us,
                   "verifier, drafter: how long a forward waits for open sessions still to come "
                   "(at least; a quarter of the last forward's time if longer)")
      ->capture_default_str();
  serve
      ->add_option("--cache-memory", flags->cache_memory,
                   "verifier, drafter: memory for sessions' caches, e.g. 8GiB (default: half "
                   "of what is free once the weights are loaded)")
      ->transform(CLI::AsSizeValue(/*kb_is_1000=*/false));
  serve
      ->add_option("--cache-block-tokens", flags->cache_block_tokens,
                   "verifier, drafter: sessions reserve cache memory in blocks of this many tokens")
      ->capture_default_str();
  AddModelOptions(*serve, flags->model_options, "verifier, drafter: ");
  serve
      ->add_option("--session-idle-timeout", flags->session_idle_timeout_s,
                   "verifier, drafter: seconds before an untouched session is dropped")
      ->capture_default_str();
  serve->add_option("--drafter", flags->drafter,
                    "drafter, all: the DFlash drafter directory, \"suffix\" (model-free, "
                    "drafting from the text's own earlier continuations), or \"suffix+DIR\" "
                    "(both, the one expected to be accepted longer each step)");
  serve->add_option("--target", flags->target,
                    "drafter: the target checkpoint (only its embedding and head are read)");
  serve
      ->add_option(
          "--window", flags->window,
          "drafter, orchestrator, all: default draft attention window (0: the drafter's own)")
      ->capture_default_str();
  serve->add_option("--verifier-addr", flags->verifier_addr,
                    "orchestrator: HOST:PORT (waited for, asked again every --pairs-refresh s); "
                    "drafter: map the target's embedding and head from this verifier on the same "
                    "GPU instead of reading a second copy from --target");
  serve->add_option("--drafter-addr", flags->drafter_addr,
                    "orchestrator: HOST:PORT (none: target-only)");
  serve->add_option("--pairs", flags->pairs,
                    "orchestrator: verifier + drafter hosts instead of --verifier-addr: "
                    "dns:NAME (every address of NAME, e.g. a headless Service) or HOST,HOST…");
  serve
      ->add_option("--verifier-port", flags->verifier_port,
                   "orchestrator: the verifiers' port on --pairs hosts")
      ->capture_default_str();
  serve
      ->add_option("--drafter-port", flags->drafter_port,
                   "orchestrator: the drafters' port on --pairs hosts (0: target-only)")
      ->capture_default_str();
  serve
      ->add_option("--pairs-refresh", flags->pairs_refresh_s,
                   "orchestrator: seconds between looks for --pairs hosts (or --verifier-addr) "
                   "joining or leaving")
      ->capture_default_str();
  serve->add_option("--tokenizer", flags->tokenizer,
                    "orchestrator, all: tokenizer.json for text prompts (all: default the "
                    "model's own)");
  serve->add_option("--model-name", flags->model_name, "orchestrator, all: the `model` label")
      ->capture_default_str();
  serve
      ->add_option("--max-running", flags->max_running,
                   "orchestrator, all: requests generating at once (the cache memory budget "
                   "admits them; the default, --max-batch's, lets all share each forward)")
      ->capture_default_str();
  serve
      ->add_option("--max-waiting", flags->max_waiting,
                   "orchestrator, all: requests queued beyond those (then RESOURCE_EXHAUSTED)")
      ->capture_default_str();
  serve
      ->add_option("--block-size", flags->block_size,
                   "orchestrator, all: default draft block (0: the drafter's)")
      ->capture_default_str();
  serve->add_flag("--speculation-guard,!--no-speculation-guard", flags->speculation_guard,
                  "orchestrator, all: pick each step's block (up to the default) by measured "
                  "cost and acceptance, 1 when speculation does not pay; a request's "
                  "speculation.block_size fixes its own (default: on)");
  serve
      ->add_option("--draft-acceptance", flags->draft_acceptance,
                   "orchestrator, all: how a sampled request that names none has its drafts "
                   "drawn and accepted: match (the drafter's most likely tokens against the "
                   "target's draw; a seed gives the target-only tokens) or rejection-sampling "
                   "(drafts drawn from the drafter, accepted with probability min(1, p/q): more "
                   "accepted, the same distribution)")
      ->check(CLI::IsMember({"match", "rejection-sampling"}))
      ->capture_default_str();
  serve
      ->add_option("--call-timeout", flags->call_timeout_s,
                   "orchestrator: seconds before a verifier or drafter call fails; drafter with "
                   "--verifier-addr: how long to wait for the verifier")
      ->capture_default_str();
  serve
      ->add_option("--regime-medium-from", flags->regime_medium_from,
                   "orchestrator, all: shortest prompt (tokens) of the medium regime")
      ->capture_default_str();
  serve
      ->add_option("--regime-long-from", flags->regime_long_from,
                   "orchestrator, all: shortest prompt (tokens) of the long regime")
      ->capture_default_str();
  serve
      ->add_option("--work-root", flags->work_root,
                   "trainer: the jobs database and the jobs' default output directories")
      ->capture_default_str();
  serve->add_option("--allowed-root", flags->allowed_roots,
                    "trainer: besides the work root, a directory a job's output directory and the "
                    "paths in its config may lie under, after `..` and symlinks (repeatable)");
  serve->add_option("--max-running-jobs", flags->max_running_jobs, "trainer: jobs run at once")
      ->capture_default_str();
  serve->callback([serve, flags] { RunOrExit(*serve, [&] { return Serve(*flags); }); });
}

}  // namespace specd::cli
