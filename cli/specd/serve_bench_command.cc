// specd bench serve: what the distributed path costs against the embedded one, and how the
// served system behaves under load.
//  1. Per-step overhead: the same greedy requests through the orchestrator on three pairs, run in
//     alternation: the engine's in-process ports (embedded, what `serve --role all` runs), the
//     verifier and drafter handlers called in process (proto mapping and shared-memory context
//     rows, no network), and the handlers behind gRPC servers on loopback (distributed: also
//     serialization, TCP and thread hops); decode time per Draft → Verify step of each, and each
//     one's ratio to the embedded one.
//  2. Concurrency sweep: the embedded and the distributed stack, each behind a GenerationService
//     on loopback, c clients each streaming requests back to back, speculative and target-only
//     (block size 1) in alternation: aggregate tokens/s and its ratio to one client, p50/p95 time
//     to first token and inter-token latency (the gap between streamed chunks, as vLLM's
//     benchmark counts it), and the mean batch size of the target's and the drafter's forwards.
//     --max-batch 1 runs one sequence per forward: the engine without continuous batching. Every
//     session's caches come from one memory budget (--cache-memory), as in `serve --role all`;
//     the peak share of it each point reserved is reported.
// With --force-tau every speculative block accepts the same number of tokens
// (forced_acceptance_drafter.h, against each prompt's greedy target-only continuation), so the
// served system is measured at a given acceptance whatever the drafter.
// Prompts are random ids, or with --prompts the user turns of a conversations JSONL (e.g. a
// pipeline's data/eval-prompts.jsonl) sent as chats, thinking off, as the pipeline evaluates.
#include <prometheus/registry.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/specd/commands.h"
#include "cli/specd/model_options_flags.h"
#include "cli/specd/percentile.h"
#include "common/base/clock.h"
#include "common/engine/forced_acceptance_drafter.h"
#include "common/engine/generator.h"
#include "common/engine/in_process_ports.h"
#include "common/model/qwen35_model.h"
#include "common/model/token_head.h"
#include "common/rpc/api_key.h"
#include "common/rpc/grpc_server.h"
#include "common/text/tokenizer.h"
#include "nlohmann/json.hpp"
#include "services/drafter/drafter_grpc.h"
#include "services/drafter/drafter_handler.h"
#include "services/drafter/served_drafter.h"
#include "services/orchestrator/generation_grpc.h"
#include "services/orchestrator/generation_handler.h"
#include "services/orchestrator/prompt.h"
#include "services/verifier/verifier_grpc.h"
#include "services/verifier/verifier_handler.h"
#include "specd/v1/generation.grpc.pb.h"

namespace specd::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kMaxSessionLength = 4096;  // positions a verifier session holds

struct ServeBenchFlags {
  std::string model;
  std::string drafter;
  std::string prompts;    // conversations JSONL; empty: random ids
  std::string tokenizer;  // for --prompts; default: the model's tokenizer.json
  int64_t prompt_length = 64;
  int64_t new_tokens = 64;
  int64_t requests = 6;  // per measurement of part 1, per client in part 2
  int64_t rounds = 3;
  std::vector<int64_t> concurrency = {1, 2, 4, 8, 16, 32};
  int64_t max_batch = 64;         // sequences per forward (BatchingOptions::max_sequences)
  int64_t batch_delay_us = 2000;  // BatchingOptions::max_delay
  std::vector<std::string> sweep = {"embedded", "distributed"};
  int64_t cache_memory = 0;  // bytes; 0: engine::DefaultCacheBudget()
  int64_t force_tau = 0;     // 0: the drafter's own proposals
  int64_t block_size = 0;    // speculative requests' blocks; 0: the server's speculation guard's
  float temperature = 0;     // every request's sampling; 0: greedy
  float top_p = 1;
  int64_t top_k = 0;
  model::ModelOptions model_options;  // AddModelOptions' flags
};

// The most cache memory reserved since the last Reset.
class PeakUse {
 public:
  void See(int64_t bytes) {
    int64_t seen = peak_.load();
    while (bytes > seen && !peak_.compare_exchange_weak(seen, bytes)) {
    }
  }
  int64_t Reset() { return peak_.exchange(0); }

 private:
  std::atomic<int64_t> peak_ = 0;
};

absl::StatusOr<std::vector<v1::GenerateRequest>> Requests(const ServeBenchFlags& flags,
                                                          int64_t vocab) {
  std::vector<v1::GenerateRequest> requests(flags.requests);
  std::mt19937_64 random(0);
  std::uniform_int_distribution<int64_t> token(0, vocab - 1);
  std::ifstream conversations;
  if (!flags.prompts.empty()) {
    conversations.open(flags.prompts);
    if (!conversations) return absl::NotFoundError(absl::StrCat("cannot read ", flags.prompts));
  }
  for (v1::GenerateRequest& request : requests) {
    if (flags.prompts.empty()) {
      for (int64_t i = 0; i < flags.prompt_length; ++i) {
        request.mutable_prompt()->mutable_token_ids()->add_ids(
            static_cast<uint32_t>(token(random)));
      }
    } else {
      std::string line;
      if (!std::getline(conversations, line)) {
        return absl::InvalidArgumentError(
            absl::StrCat(flags.prompts, " has fewer than ", flags.requests, " conversations"));
      }
      const nlohmann::json conversation = nlohmann::json::parse(line, nullptr, false);
      if (!conversation.is_object() || !conversation.contains("messages")) {
        return absl::InvalidArgumentError(absl::StrCat(flags.prompts, ": not a conversation"));
      }
      v1::ChatInput& chat = *request.mutable_prompt()->mutable_chat();
      v1::ChatMessage& user = *chat.add_messages();
      user.set_role("user");
      user.set_content(conversation["messages"][0].value("content", ""));
      chat.set_enable_thinking(false);
    }
    if (flags.block_size > 0) {
      request.mutable_speculation()->set_block_size(static_cast<uint32_t>(flags.block_size));
    }
    request.mutable_sampling()->set_temperature(flags.temperature);
    request.mutable_sampling()->set_top_p(flags.top_p);
    request.mutable_sampling()->set_top_k(static_cast<uint32_t>(flags.top_k));
    request.mutable_sampling()->set_seed(&request - requests.data());
    request.mutable_sampling()->set_max_new_tokens(static_cast<uint32_t>(flags.new_tokens));
    request.mutable_sampling()->set_ignore_eos(true);
  }
  return requests;
}

// Each request's prompt ids (after the chat template, as the orchestrator renders it) followed by
// the target's greedy continuation: what a forced drafter follows.
absl::StatusOr<std::vector<std::vector<int64_t>>> TargetContinuations(
    const model::Qwen35Model& target, const std::vector<v1::GenerateRequest>& requests,
    const text::Tokenizer* tokenizer, text::ChatFlavor chat_flavor) {
  const engine::Generator target_only(target, nullptr);
  const text::ChatTemplate chat(chat_flavor);
  std::vector<std::vector<int64_t>> continuations;
  for (const v1::GenerateRequest& request : requests) {
    absl::StatusOr<std::vector<int64_t>> prompt = orchestrator::PromptIds(
        request.prompt(), tokenizer, chat,
        {.vocab_size = target.config().vocab_size, .max_prompt_tokens = kMaxSessionLength - 1});
    if (!prompt.ok()) return prompt.status();
    absl::StatusOr<engine::GenerationResult> alone =
        target_only.Generate({.prompt = *prompt,
                              .sampling = {},
                              .stop = {.max_new_tokens = request.sampling().max_new_tokens(),
                                       .eos_ids = {},
                                       .stop_ids = {},
                                       .stop_strings = {},
                                       .ignore_eos = true}});
    if (!alone.ok()) return alone.status();
    prompt->insert(prompt->end(), alone->ids.begin(), alone->ids.end());
    continuations.push_back(*std::move(prompt));
  }
  return continuations;
}

struct StepCost {
  double decode_s = 0;
  int64_t steps = 0;
  int64_t tokens = 0;
  int64_t drafts = 0;
  int64_t accepted = 0;
};

absl::Status RunRequests(orchestrator::GenerationHandler& handler,
                         const std::vector<v1::GenerateRequest>& requests, StepCost& cost) {
  for (const v1::GenerateRequest& request : requests) {
    absl::StatusOr<v1::GenerateResponse> response = handler.Generate(request, [] { return false; });
    if (!response.ok()) return response.status();
    const v1::RequestTiming& timing = response->timing();
    cost.decode_s += timing.decode_time().seconds() + timing.decode_time().nanos() * 1e-9;
    cost.steps +=
        response->acceptance().num_drafts() + response->acceptance().num_target_only_steps();
    cost.tokens += response->token_ids_size();
    cost.drafts += response->acceptance().num_drafts();
    cost.accepted += response->acceptance().num_accepted_tokens();
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::Channel> Loopback(int port) {
  return rpc::Connect(absl::StrCat("127.0.0.1:", port));
}

// A path of the sweep: its orchestrator, and where its forwards' batching is counted.
struct SweptPath {
  const char* name;
  orchestrator::GenerationHandler* handler;
  std::function<engine::BatchingStats()> target_batches;
  std::function<engine::BatchingStats()> draft_batches;
};

struct SweepPoint {
  double tokens_per_s = 0;
  double tau = 0;  // tokens per drafted step; 0 without drafts
  double ttft_p50_ms = 0, ttft_p95_ms = 0;
  double itl_p50_ms = 0, itl_p95_ms = 0;     // between streamed messages (a block's tokens: one)
  double tpot_p50_ms = 0, tpot_p95_ms = 0;   // per request: after its first token, per token
  double target_batch = 0, draft_batch = 0;  // mean sequences per forward during the point
  double pool_peak = 0;                      // the most of the cache budget reserved at once
  int64_t errors = 0;
};

double MeanBatch(const engine::BatchingStats& before, const engine::BatchingStats& after) {
  const int64_t steps = after.steps - before.steps;
  return steps == 0 ? 0 : static_cast<double>(after.sequences - before.sequences) / steps;
}

// `clients` clients, each streaming every request back to back through the GenerationService
// on `port`, drafting blocks of `block_size` (0: the request's own, 1: target-only).
SweepPoint RunSweepPoint(int port, const std::vector<v1::GenerateRequest>& requests,
                         uint32_t block_size, int64_t clients, const SweptPath& path,
                         const engine::CachePool& pool, PeakUse& peak) {
  std::vector<std::vector<double>> first_token(clients), gaps(clients), per_token(clients);
  std::vector<int64_t> tokens(clients, 0), errors(clients, 0);
  std::vector<int64_t> drafts(clients, 0), accepted(clients, 0);
  const engine::BatchingStats target_before = path.target_batches();
  const engine::BatchingStats draft_before = path.draft_batches();
  peak.Reset();
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (int64_t client = 0; client < clients; ++client) {
    threads.emplace_back([&, client] {
      auto stub = v1::GenerationService::NewStub(Loopback(port));
      for (const v1::GenerateRequest& generate : requests) {
        v1::GenerateStreamRequest request;
        *request.mutable_prompt() = generate.prompt();
        *request.mutable_sampling() = generate.sampling();
        *request.mutable_speculation() = generate.speculation();
        if (block_size > 0) request.mutable_speculation()->set_block_size(block_size);
        grpc::ClientContext context;
        const Clock::time_point sent = Clock::now();
        Clock::time_point last = sent;
        std::unique_ptr<grpc::ClientReader<v1::GenerateStreamResponse>> reader =
            stub->GenerateStream(&context, request);
        v1::GenerateStreamResponse message;
        bool first = true;
        Clock::time_point first_at;
        int64_t after_first = 0;     // tokens streamed after the first message
        v1::AcceptanceStats totals;  // cumulative: the last message's are the request's
        while (reader->Read(&message)) {
          totals = message.acceptance();
          if (message.token_ids_size() == 0) continue;
          const Clock::time_point now = Clock::now();
          const double ms = base::Milliseconds(now - last);
          (first ? first_token[client] : gaps[client]).push_back(ms);
          if (first) {
            first_at = now;
          } else {
            after_first += message.token_ids_size();
          }
          first = false;
          last = now;
          tokens[client] += message.token_ids_size();
        }
        if (after_first > 0) {
          per_token[client].push_back(base::Milliseconds(last - first_at) /
                                      static_cast<double>(after_first));
        }
        drafts[client] += totals.num_drafts();
        accepted[client] += totals.num_accepted_tokens();
        if (!reader->Finish().ok()) ++errors[client];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> ttft, itl, tpot;
  SweepPoint point;
  int64_t total_tokens = 0, total_drafts = 0, total_accepted = 0;
  for (int64_t client = 0; client < clients; ++client) {
    total_drafts += drafts[client];
    total_accepted += accepted[client];
    ttft.insert(ttft.end(), first_token[client].begin(), first_token[client].end());
    itl.insert(itl.end(), gaps[client].begin(), gaps[client].end());
    tpot.insert(tpot.end(), per_token[client].begin(), per_token[client].end());
    total_tokens += tokens[client];
    point.errors += errors[client];
  }
  point.tokens_per_s = static_cast<double>(total_tokens) / seconds;
  point.tau = total_drafts == 0
                  ? 0
                  : 1 + static_cast<double>(total_accepted) / static_cast<double>(total_drafts);
  point.ttft_p50_ms = Percentile(ttft, 0.5);
  point.ttft_p95_ms = Percentile(ttft, 0.95);
  point.itl_p50_ms = Percentile(itl, 0.5);
  point.itl_p95_ms = Percentile(itl, 0.95);
  point.tpot_p50_ms = Percentile(tpot, 0.5);
  point.tpot_p95_ms = Percentile(tpot, 0.95);
  point.target_batch = MeanBatch(target_before, path.target_batches());
  point.draft_batch = MeanBatch(draft_before, path.draft_batches());
  point.pool_peak =
      static_cast<double>(peak.Reset()) / static_cast<double>(pool.use().capacity_bytes);
  return point;
}

absl::Status ServeBench(const ServeBenchFlags& flags) {
  const model::ModelOptions& model_options = flags.model_options;
  absl::StatusOr<model::Qwen35Model> target = model::Qwen35Model::Load(flags.model, model_options);
  if (!target.ok()) return target.status();
  absl::StatusOr<drafter::ServedDrafter> drafter = drafter::OpenServedDrafter(
      flags.drafter, target->config(), model_options,
      [&]() -> absl::StatusOr<model::TokenHead> { return target->token_head(); });
  if (!drafter.ok()) return drafter.status();
  std::optional<text::Tokenizer> tokenizer;
  if (!flags.prompts.empty()) {
    absl::StatusOr<text::Tokenizer> loaded = text::Tokenizer::FromFile(
        text::Tokenizer::FileFor(flags.model, flags.tokenizer)
            .value_or(std::filesystem::path(flags.model) / "tokenizer.json"));
    if (!loaded.ok()) return loaded.status();
    tokenizer.emplace(*std::move(loaded));
  }
  const text::Tokenizer* text_tokenizer = tokenizer.has_value() ? &*tokenizer : nullptr;
  orchestrator::OrchestratorOptions options;
  options.max_running = flags.concurrency.back();
  options.max_waiting = flags.concurrency.back();
  absl::StatusOr<std::vector<v1::GenerateRequest>> prepared =
      Requests(flags, target->config().vocab_size);
  if (!prepared.ok()) return prepared.status();
  const std::vector<v1::GenerateRequest>& requests = *prepared;
  std::unique_ptr<engine::Drafter> unforced;  // what a forced drafter wraps; outlives the handlers
  if (flags.force_tau > 0) {
    absl::StatusOr<std::vector<std::vector<int64_t>>> references =
        TargetContinuations(*target, requests, text_tokenizer, options.chat_flavor);
    if (!references.ok()) return references.status();
    unforced = std::move(drafter->drafter);
    absl::StatusOr<std::unique_ptr<engine::ForcedAcceptanceDrafter>> forced =
        engine::ForcedAcceptanceDrafter::Create(*unforced, *std::move(references), flags.force_tau,
                                                target->config().vocab_size);
    if (!forced.ok()) return forced.status();
    drafter->drafter = *std::move(forced);
  }
  prometheus::Registry registry;
  const engine::BatchingOptions batching{
      .max_rows = 2048,
      .max_sequences = flags.max_batch,
      .max_delay = std::chrono::microseconds(flags.batch_delay_us),
      .turns = std::make_shared<engine::DeviceTurns>()};  // one device: one forward at a time
  const int64_t max_sessions = std::max<int64_t>(64, 2 * flags.concurrency.back());
  PeakUse peak;
  absl::StatusOr<std::unique_ptr<engine::CachePool>> pool = engine::CachePool::Create(
      {.budget_bytes = flags.cache_memory > 0 ? flags.cache_memory : engine::DefaultCacheBudget(),
       .block_tokens = 16,
       .max_waiting = max_sessions},
      [&peak](const engine::CachePoolUse& use) { peak.See(use.used_bytes); });
  if (!pool.ok()) return pool.status();
  engine::CachePool& cache_pool = **pool;
  absl::StatusOr<std::unique_ptr<verifier::VerifierHandler>> verifier =
      verifier::VerifierHandler::Create(*target, {.model_name = flags.model,
                                                  .quantization = "",
                                                  .tapped_layer_ids = {},
                                                  .max_sessions = max_sessions,
                                                  .max_session_length = kMaxSessionLength,
                                                  .max_block_size = 16,
                                                  .session_idle_timeout = absl::Seconds(60),
                                                  .open_sessions = nullptr,
                                                  .batching = batching,
                                                  .cache_pool = &cache_pool});
  if (!verifier.ok()) return verifier.status();
  absl::StatusOr<std::unique_ptr<drafter::DrafterHandler>> drafter_handler =
      drafter::DrafterHandler::Create(*std::move(drafter), target->config(),
                                      {.model_name = flags.drafter,
                                       .quantization = "",
                                       .default_window = 0,
                                       .max_sessions = max_sessions,
                                       .session_idle_timeout = absl::Seconds(60),
                                       .open_sessions = nullptr,
                                       .batching = batching,
                                       .cache_pool = &cache_pool});
  if (!drafter_handler.ok()) return drafter_handler.status();

  const std::shared_ptr<verifier::VerifierHandler> verifier_handler = *std::move(verifier);
  const std::shared_ptr<drafter::DrafterHandler> drafter_handler_shared =
      *std::move(drafter_handler);
  verifier::VerifierGrpcService verifier_service(*verifier_handler);
  drafter::DrafterGrpcService drafter_service(*drafter_handler_shared);
  absl::StatusOr<rpc::GrpcServer> verifier_server =
      rpc::StartGrpcServer("127.0.0.1:0", {&verifier_service}, {}, registry);
  if (!verifier_server.ok()) return verifier_server.status();
  absl::StatusOr<rpc::GrpcServer> drafter_server =
      rpc::StartGrpcServer("127.0.0.1:0", {&drafter_service}, {}, registry);
  if (!drafter_server.ok()) return drafter_server.status();
  const std::vector<std::pair<const char*, orchestrator::BackendPair>> pairs = {
      {"embedded",
       {.host = "in-process",
        .verifier = verifier_handler,
        .drafter = drafter_handler_shared,
        .in_process = std::make_shared<engine::InProcessPair>(
            *target, &drafter_handler_shared->drafter(),
            engine::PairOptions{.target_batching = batching,
                                .draft_batching = batching,
                                .cache_pool = &cache_pool})}},
      {"handlers (shm)",
       {.host = "handlers", .verifier = verifier_handler, .drafter = drafter_handler_shared}},
      {"distributed",
       {.host = "loopback",
        .verifier = std::make_shared<verifier::GrpcVerifierClient>(Loopback(verifier_server->port),
                                                                   absl::Seconds(600)),
        .drafter = std::make_shared<drafter::GrpcDrafterClient>(Loopback(drafter_server->port),
                                                                absl::Seconds(600))}}};
  struct Path {
    const char* name;
    std::unique_ptr<orchestrator::BackendPool> pool;
    prometheus::Registry metrics;
    std::unique_ptr<orchestrator::GenerationHandler> handler;
    StepCost cost;
  };
  std::vector<Path> paths(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    Path& path = paths[i];
    path.name = pairs[i].first;
    absl::StatusOr<std::unique_ptr<orchestrator::BackendPool>> pool =
        orchestrator::BackendPool::Fixed(pairs[i].second, absl::Seconds(5));
    if (!pool.ok()) return pool.status();
    path.pool = *std::move(pool);
    absl::StatusOr<std::unique_ptr<orchestrator::GenerationHandler>> handler =
        orchestrator::GenerationHandler::Create(*path.pool, text_tokenizer, path.metrics, options);
    if (!handler.ok()) return handler.status();
    path.handler = *std::move(handler);
  }

  // 1. Per-step overhead, the paths in alternation.
  for (int64_t round = 0; round < flags.rounds; ++round) {
    for (Path& path : paths) {
      if (absl::Status ran = RunRequests(*path.handler, requests, path.cost); !ran.ok()) return ran;
    }
  }
  std::printf(
      "## Per-step overhead (%lld requests × %lld rounds, %s prompts, %lld new tokens)\n\n",
      static_cast<long long>(flags.requests), static_cast<long long>(flags.rounds),
      (flags.prompts.empty() ? absl::StrCat(flags.prompt_length, "-token random") : "chat").c_str(),
      static_cast<long long>(flags.new_tokens));
  std::printf(
      "| path | ms / step | × embedded | tokens / s (decode) | τ |\n|---|---|---|---|---|\n");
  const double embedded_step = paths.front().cost.decode_s / paths.front().cost.steps;
  for (const Path& path : paths) {
    const StepCost& cost = path.cost;
    const double step = cost.decode_s / cost.steps;
    std::printf("| %s | %.3f | %.3f | %.1f | %.2f |\n", path.name, 1e3 * step, step / embedded_step,
                cost.tokens / cost.decode_s,
                cost.drafts == 0 ? 0.0 : 1 + static_cast<double>(cost.accepted) / cost.drafts);
  }
  std::printf("\n");

  // 2. Concurrency sweep through the public API on loopback, embedded and distributed.
  std::printf(
      "## Concurrency sweep (%lld requests per client, at most %lld sequences per forward, "
      "%.1f MiB of cache memory)\n\n",
      static_cast<long long>(flags.requests), static_cast<long long>(flags.max_batch),
      static_cast<double>(cache_pool.use().capacity_bytes) / (1 << 20));
  std::printf(
      "| path | decoding | clients | tokens / s | × 1 client | τ | TTFT p50 (ms) | TTFT p95 (ms) | "
      "ITL p50 (ms) | ITL p95 (ms) | TPOT p50 (ms) | TPOT p95 (ms) | mean batch (target / "
      "drafter) | cache pool (peak) | errors |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  const engine::InProcessPair& embedded = *pairs.front().second.in_process;
  const std::vector<SweptPath> swept = {
      {.name = "embedded",
       .handler = paths.front().handler.get(),
       .target_batches = [&] { return embedded.target_stats(); },
       .draft_batches = [&] { return embedded.drafter_stats(); }},
      {.name = "distributed",
       .handler = paths.back().handler.get(),
       .target_batches = [&] { return verifier_handler->batching_stats(); },
       .draft_batches = [&] { return drafter_handler_shared->batching_stats(); }}};
  for (const SweptPath& path : swept) {
    if (std::find(flags.sweep.begin(), flags.sweep.end(), path.name) == flags.sweep.end()) continue;
    orchestrator::GenerationGrpcService service(*path.handler, rpc::ApiKey());
    absl::StatusOr<rpc::GrpcServer> server =
        rpc::StartGrpcServer("127.0.0.1:0", {&service}, {}, registry);
    if (!server.ok()) return server.status();
    // An untimed round at the most clients, two tokens each: the process's first forwards of
    // that many rows touch their activations' memory for the first time (page faults were 9 % of
    // such a forward's time), which would otherwise fall on whichever decoding is measured first.
    std::vector<v1::GenerateRequest> warm_up = {requests.front()};
    warm_up.front().mutable_sampling()->set_max_new_tokens(2);
    RunSweepPoint(server->port, warm_up, /*block_size=*/1,
                  *std::max_element(flags.concurrency.begin(), flags.concurrency.end()), path,
                  cache_pool, peak);
    std::map<std::string, double> single_stream;  // tokens/s at one client, per decoding
    for (const int64_t clients : flags.concurrency) {
      for (const auto& [decoding, block_size] :
           {std::pair<std::string, uint32_t>{"speculative", 0}, {"target-only", 1}}) {
        const SweepPoint point =
            RunSweepPoint(server->port, requests, block_size, clients, path, cache_pool, peak);
        if (clients == flags.concurrency.front()) single_stream[decoding] = point.tokens_per_s;
        std::printf(
            "| %s | %s | %lld | %.1f | %.2f | %.2f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | "
            "%.2f / %.2f | %.1f%% | %lld |\n",
            path.name, decoding.c_str(), static_cast<long long>(clients), point.tokens_per_s,
            point.tokens_per_s / single_stream[decoding], point.tau, point.ttft_p50_ms,
            point.ttft_p95_ms, point.itl_p50_ms, point.itl_p95_ms, point.tpot_p50_ms,
            point.tpot_p95_ms, point.target_batch, point.draft_batch, 100 * point.pool_peak,
            static_cast<long long>(point.errors));
        std::fflush(stdout);
      }
    }
    server->server->Shutdown();
  }
  return absl::OkStatus();
}

}  // namespace

void AddServeBench(CLI::App& bench) {
  auto flags = std::make_shared<ServeBenchFlags>();
  CLI::App* command = bench.add_subcommand(
      "serve", "embedded vs distributed per-step overhead, and a concurrency sweep");
  command->add_option("--model", flags->model, "the target checkpoint")->required();
  command
      ->add_option("--drafter", flags->drafter,
                   "the DFlash drafter directory, \"suffix\" or \"suffix+DIR\"")
      ->required();
  command->add_option("--prompts", flags->prompts,
                      "conversations JSONL whose user turns are the prompts (default: random ids)");
  command->add_option("--tokenizer", flags->tokenizer,
                      "tokenizer.json for --prompts (default: the model's)");
  command->add_option("--prompt-len", flags->prompt_length, "random prompt tokens")
      ->capture_default_str();
  command->add_option("--new-tokens", flags->new_tokens, "new tokens per request")
      ->capture_default_str();
  command
      ->add_option("--requests", flags->requests,
                   "requests per measurement (part 1) and per client (part 2)")
      ->capture_default_str();
  command->add_option("--rounds", flags->rounds, "alternating rounds of part 1")
      ->capture_default_str();
  command
      ->add_option("--force-tau", flags->force_tau,
                   "Force every speculative block to accept this many tokens (the target's own "
                   "next token included), following each prompt's greedy target-only continuation")
      ->check(CLI::PositiveNumber);
  command
      ->add_option("--block-size", flags->block_size,
                   "every speculative request's block size (default: the server's speculation "
                   "guard picks it from measured costs, so it can differ from run to run); with "
                   "--force-tau, blocks of at least τ tokens keep every step at the forced τ")
      ->check(CLI::PositiveNumber);
  command
      ->add_option("--temperature", flags->temperature,
                   "every request's temperature, each seeded by its index (0: greedy)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--top-p", flags->top_p, "every request's nucleus sampling threshold")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  command->add_option("--top-k", flags->top_k, "every request's top-k; 0 keeps all")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--concurrency", flags->concurrency, "client counts of the sweep")
      ->delimiter(',');
  command->add_option("--sweep", flags->sweep, "paths the sweep runs: embedded, distributed")
      ->check(CLI::IsMember({"embedded", "distributed"}))
      ->delimiter(',');
  command
      ->add_option("--max-batch", flags->max_batch,
                   "sequences per forward (1: no continuous batching)")
      ->capture_default_str();
  command
      ->add_option("--batch-delay-us", flags->batch_delay_us,
                   "how long a step waits for sessions still to come (at least; a quarter of the "
                   "last forward's time if longer)")
      ->capture_default_str();
  AddModelOptions(*command, flags->model_options);
  command
      ->add_option("--cache-memory", flags->cache_memory,
                   "the sessions' cache memory, e.g. 2GiB (default: half of what is free)")
      ->transform(CLI::AsSizeValue(/*kb_is_1000=*/false));
  command->callback([command, flags] { RunOrExit(*command, [&] { return ServeBench(*flags); }); });
}

}  // namespace specd::cli
