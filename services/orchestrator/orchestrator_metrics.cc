#include "services/orchestrator/orchestrator_metrics.h"

#include <utility>
#include <vector>

#include "common/metrics/vllm_buckets.h"

namespace specd::orchestrator {
namespace {

const std::vector<std::string> kModelRegime = {"model", "regime"};

// Acceptance lengths are whole numbers of tokens in [1, block size]; released DFlash drafters
// use blocks of up to 16.
std::vector<double> AcceptanceLengthBuckets() {
  std::vector<double> bounds;
  for (int length = 1; length <= 16; ++length) bounds.push_back(length);
  return bounds;
}

// A drafter or verifier call: from a millisecond on a GPU to seconds for a long CPU prefill.
std::vector<double> StepBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

}  // namespace

OrchestratorMetrics::OrchestratorMetrics(metrics::Registry& registry, std::string model_name)
    : model_(std::move(model_name)),
      num_drafts_(registry.AddCounter("specd_spec_decode_num_drafts_total",
                                      "Verify steps that checked at least one drafted token.",
                                      kModelRegime)),
      num_draft_tokens_(registry.AddCounter("specd_spec_decode_num_draft_tokens_total",
                                            "Drafted tokens sent for verification.", kModelRegime)),
      num_accepted_tokens_(registry.AddCounter("specd_spec_decode_num_accepted_tokens_total",
                                               "Drafted tokens the target accepted.",
                                               kModelRegime)),
      accepted_per_position_(registry.AddCounter(
          "specd_spec_decode_num_accepted_tokens_per_pos_total",
          "Steps whose drafted token at this block position (0 = first draft) was accepted.",
          {"model", "regime", "position"})),
      acceptance_length_(registry.AddHistogram(
          "specd_acceptance_length",
          "Tokens emitted per drafted verify step (accepted drafts + 1); its mean is tau.",
          AcceptanceLengthBuckets(), kModelRegime)),
      time_to_first_token_(registry.AddHistogram("specd_time_to_first_token_seconds",
                                                 "From arrival to the first generated token.",
                                                 metrics::TimeToFirstTokenBuckets(), kModelRegime)),
      inter_token_latency_(registry.AddHistogram(
          "specd_inter_token_latency_seconds",
          "Time between consecutive emissions of tokens (one per verify step, as vLLM counts "
          "one per engine step).",
          metrics::InterTokenLatencyBuckets(), kModelRegime)),
      e2e_latency_(registry.AddHistogram("specd_e2e_request_latency_seconds",
                                         "From arrival to the end of the request.",
                                         metrics::RequestLatencyBuckets(), kModelRegime)),
      draft_step_(registry.AddHistogram("specd_drafter_step_seconds",
                                        "One Draft call as the orchestrator sees it (transport "
                                        "included).",
                                        StepBuckets(), kModelRegime)),
      verify_step_(registry.AddHistogram("specd_verifier_step_seconds",
                                         "One Verify call as the orchestrator sees it (transport "
                                         "included).",
                                         StepBuckets(), kModelRegime)),
      requests_(registry.AddCounter("specd_request_success_total",
                                    "Finished requests by why they finished.",
                                    {"model", "regime", "finished_reason"})),
      prompt_tokens_(registry.AddCounter("specd_prompt_tokens_total", "Prefilled prompt tokens.",
                                         kModelRegime)),
      generation_tokens_(
          registry.AddCounter("specd_generation_tokens_total", "Generated tokens.", kModelRegime)),
      drafter_fallbacks_(registry
                             .AddCounter("specd_drafter_fallbacks_total",
                                         "Requests that continued target-only because the "
                                         "drafter failed or was unreachable.",
                                         {"model"})
                             .WithLabels({model_})),
      running_(
          registry.AddGauge("specd_num_requests_running", "Requests generating now.", {"model"})
              .WithLabels({model_})),
      waiting_(
          registry.AddGauge("specd_num_requests_waiting", "Requests waiting for a slot.", {"model"})
              .WithLabels({model_})) {}

void OrchestratorMetrics::RecordDraftedStep(engine::Regime regime, int64_t drafts,
                                            int64_t accepted) {
  const std::string name = engine::RegimeName(regime);
  num_drafts_.WithLabels({model_, name}).Increment();
  num_draft_tokens_.WithLabels({model_, name}).Increment(static_cast<double>(drafts));
  num_accepted_tokens_.WithLabels({model_, name}).Increment(static_cast<double>(accepted));
  // Every drafted position gets its series, so one that is never accepted reads 0 rather than
  // missing from per-position ratios.
  for (int64_t position = 0; position < drafts; ++position) {
    metrics::Counter& at =
        accepted_per_position_.WithLabels({model_, name, std::to_string(position)});
    if (position < accepted) at.Increment();
  }
  acceptance_length_.WithLabels({model_, name}).Observe(static_cast<double>(accepted + 1));
}

void OrchestratorMetrics::RecordInterTokenLatency(engine::Regime regime, double seconds) {
  inter_token_latency_.WithLabels({model_, engine::RegimeName(regime)}).Observe(seconds);
}

void OrchestratorMetrics::RecordDraftCall(engine::Regime regime, double seconds) {
  draft_step_.WithLabels({model_, engine::RegimeName(regime)}).Observe(seconds);
}

void OrchestratorMetrics::RecordVerifyCall(engine::Regime regime, double seconds) {
  verify_step_.WithLabels({model_, engine::RegimeName(regime)}).Observe(seconds);
}

void OrchestratorMetrics::RecordDrafterFallback() { drafter_fallbacks_.Increment(); }

void OrchestratorMetrics::RecordRequest(const RequestRecord& record) {
  const std::string regime = engine::RegimeName(record.regime);
  requests_.WithLabels({model_, regime, record.finished_reason}).Increment();
  prompt_tokens_.WithLabels({model_, regime}).Increment(static_cast<double>(record.prompt_tokens));
  generation_tokens_.WithLabels({model_, regime})
      .Increment(static_cast<double>(record.generation_tokens));
  if (record.time_to_first_token_s >= 0) {
    time_to_first_token_.WithLabels({model_, regime}).Observe(record.time_to_first_token_s);
  }
  e2e_latency_.WithLabels({model_, regime}).Observe(record.e2e_latency_s);
}

}  // namespace specd::orchestrator
