#pragma once
// The orchestrator's Prometheus metrics: vLLM's spec-decode and latency metrics with a specd_
// prefix (research/serving_anchors.md), labelled by `model` and by the request's input-length
// `regime` where the number depends on it, so τ and time to first token can be read per regime.
#include <string>

#include "common/engine/regime.h"
#include "common/metrics/registry.h"

namespace specd::orchestrator {

// What one finished request adds to the counters and histograms.
struct RequestRecord {
  engine::Regime regime = engine::Regime::kShort;
  std::string finished_reason;  // "stop", "length", "abort" or "error"
  int64_t prompt_tokens = 0;
  int64_t generation_tokens = 0;
  double time_to_first_token_s = -1;  // < 0: no token was generated
  double e2e_latency_s = 0;
};

class OrchestratorMetrics {
 public:
  OrchestratorMetrics(metrics::Registry& registry, std::string model_name);

  // One verify step that checked `drafts` drafted tokens and accepted the first `accepted`.
  void RecordDraftedStep(engine::Regime regime, int64_t drafts, int64_t accepted);
  void RecordInterTokenLatency(engine::Regime regime, double seconds);
  void RecordDraftCall(engine::Regime regime, double seconds);
  void RecordVerifyCall(engine::Regime regime, double seconds);
  void RecordDrafterFallback();
  void RecordRequest(const RequestRecord& record);

  metrics::Gauge& running() { return running_; }
  metrics::Gauge& waiting() { return waiting_; }

 private:
  const std::string model_;
  metrics::Family<metrics::Counter>& num_drafts_;
  metrics::Family<metrics::Counter>& num_draft_tokens_;
  metrics::Family<metrics::Counter>& num_accepted_tokens_;
  metrics::Family<metrics::Counter>& accepted_per_position_;
  metrics::Family<metrics::Histogram>& acceptance_length_;
  metrics::Family<metrics::Histogram>& time_to_first_token_;
  metrics::Family<metrics::Histogram>& inter_token_latency_;
  metrics::Family<metrics::Histogram>& e2e_latency_;
  metrics::Family<metrics::Histogram>& draft_step_;
  metrics::Family<metrics::Histogram>& verify_step_;
  metrics::Family<metrics::Counter>& requests_;
  metrics::Family<metrics::Counter>& prompt_tokens_;
  metrics::Family<metrics::Counter>& generation_tokens_;
  metrics::Counter& drafter_fallbacks_;
  metrics::Gauge& running_;
  metrics::Gauge& waiting_;
};

}  // namespace specd::orchestrator
