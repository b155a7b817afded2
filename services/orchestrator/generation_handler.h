#pragma once
// The public generation API (protos/specd/v1/generation.proto) on top of verifier + drafter
// pairs: it admits requests into a bounded queue, turns prompts into ids, and runs each request
// on one pair as a loop of Draft → Verify steps, streaming the tokens every step emits and
// recording acceptance and latency per input-length regime. A drafter that fails or cannot be
// reached never fails a request: it continues target-only (Verify without drafts), counted in a
// metric.
#include <prometheus/registry.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "common/engine/admission_queue.h"
#include "common/engine/ports.h"
#include "common/engine/regime.h"
#include "common/text/chat_template.h"
#include "common/text/tokenizer.h"
#include "services/orchestrator/backend_pool.h"
#include "services/orchestrator/orchestrator_metrics.h"
#include "specd/v1/generation.pb.h"

namespace specd::orchestrator {

struct OrchestratorOptions {
  std::string model_name = "specd";  // the `model` metric label and GetModelInfo's model_name
  std::string target_model;          // where the checkpoints came from, for GetModelInfo
  std::string drafter_model;
  engine::RegimeThresholds regimes = {};
  int64_t max_running = 64;  // requests generating at once
  int64_t max_waiting = 64;  // requests waiting for a slot; beyond: RESOURCE_EXHAUSTED
  int64_t max_stop_strings = 16;
  // Speculation a request gets when it asks for none: 0 = the drafter's trained block size.
  int64_t default_block_size = 0;
  int64_t default_draft_window = 0;
  // A speculation guard picks each step's block for requests that name no block size; off:
  // every block is the request's (or the default) block size.
  bool speculation_guard = true;
  // How a sampled request that names no SpeculationParams.draft_acceptance has its drafts drawn
  // and accepted: rejection sampling (engine::DraftOptions::rejection_sampling) or sample and
  // match (a seed then gives target-only decoding's tokens).
  bool rejection_sampling = false;
  text::ChatFlavor chat_flavor = text::ChatFlavor::kQwen3_5;
};

// "stop", "length" or "abort" (vLLM's name for it; OpenAI has none): the `finished_reason`
// metric label and the OpenAI API's finish_reason. Null for FINISH_REASON_UNSPECIFIED.
const char* FinishReasonName(v1::FinishReason reason);

// Adds one stream message to the unary response the stream adds up to.
void MergeStreamMessage(const v1::GenerateStreamResponse& message, v1::GenerateResponse& response);

class GenerationHandler {
 public:
  // Requests are UNAVAILABLE until a pair has joined `backends` (its target sets the limits they
  // are checked against). `backends`, `tokenizer` (null: token ids only) and `registry` must
  // outlive it.
  static absl::StatusOr<std::unique_ptr<GenerationHandler>> Create(BackendPool& backends,
                                                                   const text::Tokenizer* tokenizer,
                                                                   prometheus::Registry& registry,
                                                                   OrchestratorOptions options);

  // True once the client cancelled or its deadline passed; checked before every step.
  using Cancelled = std::function<bool()>;
  // Sends one stream message; false when the client is gone.
  using StreamWriter = std::function<bool(const v1::GenerateStreamResponse&)>;

  absl::StatusOr<v1::GenerateResponse> Generate(const v1::GenerateRequest& request,
                                                const Cancelled& cancelled);
  absl::Status GenerateStream(const v1::GenerateStreamRequest& request, const Cancelled& cancelled,
                              const StreamWriter& write);
  v1::AbortResponse Abort(const v1::AbortRequest& request);
  // UNAVAILABLE until a pair has joined.
  absl::StatusOr<v1::GetModelInfoResponse> GetModelInfo();

  // Refuses new requests, lets running ones finish for up to `drain`, then aborts the rest and
  // waits for them to end.
  void Shutdown(absl::Duration drain);

 private:
  struct Prepared;
  struct InFlight {
    std::atomic<bool> aborted = false;
  };

  GenerationHandler(BackendPool& backends, const text::Tokenizer* tokenizer,
                    prometheus::Registry& registry, OrchestratorOptions options);

  // Every request runs here; Generate collects the stream it writes.
  absl::Status Run(v1::GenerateStreamRequest request, const Cancelled& cancelled,
                   const StreamWriter& write);
  absl::StatusOr<Prepared> Prepare(const v1::GenerateStreamRequest& request,
                                   const v1::TargetVerifierServiceInfoResponse& target,
                                   const std::optional<v1::DrafterServiceInfoResponse>& drafter);
  // The ports `prepared` runs on: `pair`'s in-process ones (waiting for their memory until
  // `cancelled`), or its clients'.
  absl::StatusOr<engine::RequestPorts> OpenPorts(const Prepared& prepared,
                                                 const BackendPool::Lease& pair,
                                                 const std::function<bool()>& cancelled);
  // Prefill, then Draft → Verify steps on `pair` until the output stops; sessions are released
  // however it ends. `arrival` starts the request's clock.
  absl::Status Decode(const v1::GenerateStreamRequest& request, const Prepared& prepared,
                      const BackendPool::Lease& pair, InFlight& flight, const Cancelled& cancelled,
                      const StreamWriter& write, base::Clock::time_point arrival);

  BackendPool& backends_;
  const text::Tokenizer* tokenizer_;
  const text::ChatTemplate chat_;
  const OrchestratorOptions options_;
  OrchestratorMetrics metrics_;
  engine::AdmissionQueue admission_;  // request slots

  std::mutex flights_mutex_;
  std::map<std::string, std::shared_ptr<InFlight>> flights_;
  std::atomic<uint64_t> next_id_ = 1;
  const std::string id_prefix_;
};

}  // namespace specd::orchestrator
