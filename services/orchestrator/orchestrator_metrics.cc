#include "services/orchestrator/orchestrator_metrics.h"

#include <utility>

#include "common/metrics/vllm_buckets.h"

namespace specd::orchestrator {
namespace {

// Acceptance lengths are whole numbers of tokens in [1, block size]; released DFlash drafters
// use blocks of up to 16.
prometheus::Histogram::BucketBoundaries AcceptanceLengthBuckets() {
  prometheus::Histogram::BucketBoundaries bounds;
  for (int length = 1; length <= 16; ++length) bounds.push_back(length);
  return bounds;
}

// A drafter or verifier call: from a millisecond on a GPU to seconds for a long CPU prefill.
prometheus::Histogram::BucketBoundaries StepBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

}  // namespace

OrchestratorMetrics::OrchestratorMetrics(prometheus::Registry& registry, std::string model_name)
    : model_(std::move(model_name)),
      num_drafts_(prometheus::BuildCounter()
                      .Name("specd_spec_decode_num_drafts_total")
                      .Help("Verify steps that checked at least one drafted token.")
                      .Register(registry)),
      num_draft_tokens_(prometheus::BuildCounter()
                            .Name("specd_spec_decode_num_draft_tokens_total")
                            .Help("Drafted tokens sent for verification.")
                            .Register(registry)),
      num_accepted_tokens_(prometheus::BuildCounter()
                               .Name("specd_spec_decode_num_accepted_tokens_total")
                               .Help("Drafted tokens the target accepted.")
                               .Register(registry)),
      accepted_per_position_(prometheus::BuildCounter()
                                 .Name("specd_spec_decode_num_accepted_tokens_per_pos_total")
                                 .Help("Steps whose drafted token at this block position (0 = "
                                       "first draft) was accepted.")
                                 .Register(registry)),
      acceptance_length_{prometheus::BuildHistogram()
                             .Name("specd_acceptance_length")
                             .Help("Tokens emitted per drafted verify step (accepted drafts + 1); "
                                   "its mean is tau.")
                             .Register(registry),
                         AcceptanceLengthBuckets()},
      time_to_first_token_{prometheus::BuildHistogram()
                               .Name("specd_time_to_first_token_seconds")
                               .Help("From arrival to the first generated token.")
                               .Register(registry),
                           metrics::TimeToFirstTokenBuckets()},
      inter_token_latency_{prometheus::BuildHistogram()
                               .Name("specd_inter_token_latency_seconds")
                               .Help("Time between consecutive emissions of tokens (one per verify "
                                     "step, as vLLM counts one per engine step).")
                               .Register(registry),
                           metrics::InterTokenLatencyBuckets()},
      e2e_latency_{prometheus::BuildHistogram()
                       .Name("specd_e2e_request_latency_seconds")
                       .Help("From arrival to the end of the request.")
                       .Register(registry),
                   metrics::RequestLatencyBuckets()},
      draft_step_{prometheus::BuildHistogram()
                      .Name("specd_drafter_step_seconds")
                      .Help("One Draft call as the orchestrator sees it (transport included).")
                      .Register(registry),
                  StepBuckets()},
      verify_step_{prometheus::BuildHistogram()
                       .Name("specd_verifier_step_seconds")
                       .Help("One Verify call as the orchestrator sees it (transport included).")
                       .Register(registry),
                   StepBuckets()},
      guard_block_size_{prometheus::BuildHistogram()
                            .Name("specd_guard_block_size")
                            .Help("Block size (drafts + 1; 1 = target-only) the speculation guard "
                                  "chose for a step.")
                            .Register(registry),
                        AcceptanceLengthBuckets()},
      guard_expected_speedup_(prometheus::BuildGauge()
                                  .Name("specd_guard_expected_speedup")
                                  .Help("The speculation guard's expected tokens/s over "
                                        "target-only's at its last priced choice.")
                                  .Register(registry)),
      guard_expected_tokens_(prometheus::BuildGauge()
                                 .Name("specd_guard_expected_tokens_per_step")
                                 .Help("Tokens the speculation guard expected its last priced "
                                       "choice to emit.")
                                 .Register(registry)),
      requests_(prometheus::BuildCounter()
                    .Name("specd_request_success_total")
                    .Help("Finished requests by why they finished.")
                    .Register(registry)),
      prompt_tokens_(prometheus::BuildCounter()
                         .Name("specd_prompt_tokens_total")
                         .Help("Prefilled prompt tokens.")
                         .Register(registry)),
      generation_tokens_(prometheus::BuildCounter()
                             .Name("specd_generation_tokens_total")
                             .Help("Generated tokens.")
                             .Register(registry)),
      drafter_fallbacks_(prometheus::BuildCounter()
                             .Name("specd_drafter_fallbacks_total")
                             .Help("Requests that continued target-only because the drafter "
                                   "failed or was unreachable.")
                             .Register(registry)
                             .Add({{"model", model_}})),
      running_(prometheus::BuildGauge()
                   .Name("specd_num_requests_running")
                   .Help("Requests generating now.")
                   .Register(registry)
                   .Add({{"model", model_}})),
      waiting_(prometheus::BuildGauge()
                   .Name("specd_num_requests_waiting")
                   .Help("Requests waiting for a slot.")
                   .Register(registry)
                   .Add({{"model", model_}})) {}

prometheus::Labels OrchestratorMetrics::ModelRegime(engine::Regime regime) const {
  return {{"model", model_}, {"regime", engine::RegimeName(regime)}};
}

void OrchestratorMetrics::RecordDraftedStep(engine::Regime regime, int64_t drafts,
                                            int64_t accepted) {
  const prometheus::Labels labels = ModelRegime(regime);
  num_drafts_.Add(labels).Increment();
  num_draft_tokens_.Add(labels).Increment(static_cast<double>(drafts));
  num_accepted_tokens_.Add(labels).Increment(static_cast<double>(accepted));
  // Every drafted position gets its series, so one that is never accepted reads 0 rather than
  // missing from per-position ratios.
  prometheus::Labels at_position = labels;
  for (int64_t position = 0; position < drafts; ++position) {
    at_position["position"] = std::to_string(position);
    prometheus::Counter& at = accepted_per_position_.Add(at_position);
    if (position < accepted) at.Increment();
  }
  acceptance_length_.Add(labels).Observe(static_cast<double>(accepted + 1));
}

void OrchestratorMetrics::RecordGuardChoice(engine::Regime regime,
                                            const engine::GuardChoice& choice) {
  const prometheus::Labels labels = ModelRegime(regime);
  guard_block_size_.Add(labels).Observe(static_cast<double>(choice.block_size));
  if (choice.exploring) return;  // chosen to measure, not priced
  guard_expected_speedup_.Add(labels).Set(choice.expected_speedup);
  guard_expected_tokens_.Add(labels).Set(choice.expected_tokens);
}

void OrchestratorMetrics::RecordInterTokenLatency(engine::Regime regime, double seconds) {
  inter_token_latency_.Add(ModelRegime(regime)).Observe(seconds);
}

void OrchestratorMetrics::RecordDraftCall(engine::Regime regime, double seconds) {
  draft_step_.Add(ModelRegime(regime)).Observe(seconds);
}

void OrchestratorMetrics::RecordVerifyCall(engine::Regime regime, double seconds) {
  verify_step_.Add(ModelRegime(regime)).Observe(seconds);
}

void OrchestratorMetrics::RecordDrafterFallback() { drafter_fallbacks_.Increment(); }

void OrchestratorMetrics::RecordRequest(const RequestRecord& record) {
  const prometheus::Labels labels = ModelRegime(record.regime);
  prometheus::Labels with_reason = labels;
  with_reason["finished_reason"] = record.finished_reason;
  requests_.Add(with_reason).Increment();
  prompt_tokens_.Add(labels).Increment(static_cast<double>(record.prompt_tokens));
  generation_tokens_.Add(labels).Increment(static_cast<double>(record.generation_tokens));
  if (record.time_to_first_token_s >= 0) {
    time_to_first_token_.Add(labels).Observe(record.time_to_first_token_s);
  }
  e2e_latency_.Add(labels).Observe(record.e2e_latency_s);
}

}  // namespace specd::orchestrator
