#pragma once
// The orchestrator's Prometheus metrics: vLLM's spec-decode and latency metrics with a specd_
// prefix (research/serving_anchors.md), labelled by `model` and by the request's input-length
// `regime` where the number depends on it, so τ and time to first token can be read per regime.
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/labels.h>
#include <prometheus/registry.h>

#include <string>

#include "common/engine/regime.h"
#include "common/engine/speculation_guard.h"

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
  // Registers the families (a second OrchestratorMetrics on one registry shares them).
  OrchestratorMetrics(prometheus::Registry& registry, std::string model_name);

  // One verify step that checked `drafts` drafted tokens and accepted the first `accepted`.
  void RecordDraftedStep(engine::Regime regime, int64_t drafts, int64_t accepted);
  void RecordInterTokenLatency(engine::Regime regime, double seconds);
  void RecordDraftCall(engine::Regime regime, double seconds);
  void RecordVerifyCall(engine::Regime regime, double seconds);
  void RecordDrafterFallback();
  // The block a guarded step chose and what the guard expected of it.
  void RecordGuardChoice(engine::Regime regime, const engine::GuardChoice& choice);
  void RecordRequest(const RequestRecord& record);

  prometheus::Gauge& running() { return running_; }
  prometheus::Gauge& waiting() { return waiting_; }

 private:
  // prometheus-cpp gives a histogram its buckets when a series is first added, so the family
  // keeps them for every label set it meets.
  struct Histograms {
    prometheus::Family<prometheus::Histogram>& family;
    prometheus::Histogram::BucketBoundaries buckets;

    prometheus::Histogram& Add(const prometheus::Labels& labels) {
      return family.Add(labels, buckets);
    }
  };

  prometheus::Labels ModelRegime(engine::Regime regime) const;

  const std::string model_;
  prometheus::Family<prometheus::Counter>& num_drafts_;
  prometheus::Family<prometheus::Counter>& num_draft_tokens_;
  prometheus::Family<prometheus::Counter>& num_accepted_tokens_;
  prometheus::Family<prometheus::Counter>& accepted_per_position_;
  Histograms acceptance_length_;
  Histograms time_to_first_token_;
  Histograms inter_token_latency_;
  Histograms e2e_latency_;
  Histograms draft_step_;
  Histograms verify_step_;
  Histograms guard_block_size_;
  prometheus::Family<prometheus::Gauge>& guard_expected_speedup_;
  prometheus::Family<prometheus::Gauge>& guard_expected_tokens_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Counter>& prompt_tokens_;
  prometheus::Family<prometheus::Counter>& generation_tokens_;
  prometheus::Counter& drafter_fallbacks_;
  prometheus::Gauge& running_;
  prometheus::Gauge& waiting_;
};

}  // namespace specd::orchestrator
