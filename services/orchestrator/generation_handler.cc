#include "services/orchestrator/generation_handler.h"

#include <algorithm>
#include <iostream>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/base/clock.h"
#include "common/engine/decode_loop.h"
#include "common/engine/generation_output.h"
#include "common/engine/in_process_ports.h"
#include "common/engine/stop_criteria.h"
#include "common/rpc/proto_duration.h"
#include "common/rpc/random_id.h"
#include "common/rpc/status.h"
#include "services/orchestrator/prompt.h"
#include "services/orchestrator/remote_ports.h"
#include "services/verifier/sampling_params.h"

namespace specd::orchestrator {
namespace {

using base::Clock;

constexpr size_t kMaxRequestIdBytes = 128;

double SecondsBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

v1::InputLengthRegime RegimeProto(engine::Regime regime) {
  switch (regime) {
    case engine::Regime::kShort:
      return v1::INPUT_LENGTH_REGIME_SHORT;
    case engine::Regime::kMedium:
      return v1::INPUT_LENGTH_REGIME_MEDIUM;
    case engine::Regime::kLong:
      return v1::INPUT_LENGTH_REGIME_LONG;
  }
  return v1::INPUT_LENGTH_REGIME_UNSPECIFIED;
}

v1::AcceptanceStats AcceptanceProto(const engine::AcceptanceStats& stats) {
  v1::AcceptanceStats out;
  const int64_t drafted_steps = stats.steps() - stats.target_only_steps;
  int64_t draft_tokens = 0;
  int64_t accepted_tokens = 0;
  for (size_t i = 0; i < stats.proposed_at.size(); ++i) {
    draft_tokens += stats.proposed_at[i];
    accepted_tokens += stats.accepted_at[i];
  }
  out.set_num_drafts(static_cast<uint32_t>(drafted_steps));
  out.set_num_draft_tokens(static_cast<uint32_t>(draft_tokens));
  out.set_num_accepted_tokens(static_cast<uint32_t>(accepted_tokens));
  out.mutable_accepted_per_position()->Assign(stats.accepted_at.begin(), stats.accepted_at.end());
  out.set_mean_acceptance_length(
      drafted_steps == 0 ? 0 : 1 + static_cast<double>(accepted_tokens) / drafted_steps);
  out.set_num_target_only_steps(static_cast<uint32_t>(stats.target_only_steps));
  return out;
}

v1::FinishReason FinishReasonOf(engine::StopReason reason) {
  return reason == engine::StopReason::kMaxTokens ? v1::FINISH_REASON_LENGTH
                                                  : v1::FINISH_REASON_STOP;
}

}  // namespace

const char* FinishReasonName(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_STOP:
      return "stop";
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_ABORT:
      return "abort";
    default:
      return nullptr;
  }
}

void MergeStreamMessage(const v1::GenerateStreamResponse& message, v1::GenerateResponse& response) {
  // Deltas are appended; cumulative fields keep the last value.
  response.set_request_id(message.request_id());
  response.mutable_token_ids()->MergeFrom(message.token_ids());
  response.mutable_text()->append(message.text());
  response.set_finish_reason(message.finish_reason());
  *response.mutable_stop_match() = message.stop_match();
  *response.mutable_usage() = message.usage();
  *response.mutable_acceptance() = message.acceptance();
  response.mutable_acceptance_lengths()->MergeFrom(message.acceptance_lengths());
  response.set_regime(message.regime());
  response.set_seed(message.seed());
  response.mutable_logprobs()->MergeFrom(message.logprobs());
  response.mutable_prompt_token_ids()->MergeFrom(message.prompt_token_ids());
  *response.mutable_timing() = message.timing();
}

// A request checked and resolved against the server's defaults.
struct GenerationHandler::Prepared {
  std::vector<int64_t> prompt;
  engine::Regime regime = engine::Regime::kShort;
  v1::SamplingParams sampling;           // every distribution field and the seed resolved
  model::SamplingParams model_sampling;  // the same, for an in-process pair
  engine::StopConfig stop;
  engine::DraftOptions draft;              // block size 1: target-only
  bool guarded = false;                    // the pair's guard picks each step's block
  std::vector<uint32_t> tapped_layer_ids;  // the drafter's, when speculating
};

absl::StatusOr<std::unique_ptr<GenerationHandler>> GenerationHandler::Create(
    BackendPool& backends, const text::Tokenizer* tokenizer, prometheus::Registry& registry,
    OrchestratorOptions options) {
  if (options.max_running < 1 || options.max_waiting < 0) {
    return absl::InvalidArgumentError("max_running must be ≥ 1 and max_waiting ≥ 0");
  }
  return std::unique_ptr<GenerationHandler>(
      new GenerationHandler(backends, tokenizer, registry, std::move(options)));
}

GenerationHandler::GenerationHandler(BackendPool& backends, const text::Tokenizer* tokenizer,
                                     prometheus::Registry& registry, OrchestratorOptions options)
    : backends_(backends),
      tokenizer_(tokenizer),
      chat_(options.chat_flavor),
      options_(std::move(options)),
      metrics_(registry, options_.model_name),
      admission_(options_.max_running, options_.max_waiting, "request slots",
                 [this](const engine::AdmissionCounts& counts) {
                   metrics_.running().Set(static_cast<double>(counts.used));
                   metrics_.waiting().Set(static_cast<double>(counts.waiting));
                 }),
      id_prefix_(rpc::NewInstanceId()) {}

absl::StatusOr<GenerationHandler::Prepared> GenerationHandler::Prepare(
    const v1::GenerateStreamRequest& request, const v1::TargetVerifierServiceInfoResponse& target,
    const std::optional<v1::DrafterServiceInfoResponse>& drafter) {
  Prepared prepared;
  const int64_t max_context = target.max_session_length();
  absl::StatusOr<std::vector<int64_t>> prompt =
      PromptIds(request.prompt(), tokenizer_, chat_,
                {.vocab_size = target.vocab_size(), .max_prompt_tokens = max_context - 1});
  if (!prompt.ok()) return prompt.status();
  prepared.prompt = *std::move(prompt);
  const auto prompt_length = static_cast<int64_t>(prepared.prompt.size());
  prepared.regime = engine::ClassifyRegime(prompt_length, options_.regimes);

  const v1::SamplingParams& sampling = request.sampling();
  const std::vector<int64_t> eos_ids(target.eos_token_ids().begin(), target.eos_token_ids().end());
  absl::StatusOr<model::SamplingParams> resolved =
      verifier::ToModelSampling(sampling, target.vocab_size(), eos_ids);
  if (!resolved.ok()) return resolved.status();
  const int64_t room = max_context - prompt_length;
  const int64_t max_new = sampling.has_max_new_tokens() ? sampling.max_new_tokens() : room;
  if (max_new < 1 || max_new > room) {
    return absl::InvalidArgumentError(absl::StrCat("sampling.max_new_tokens = ", max_new,
                                                   " is outside [1, ", room,
                                                   "] (the context left after the prompt)"));
  }
  if (sampling.min_new_tokens() > max_new) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling.min_new_tokens = ", sampling.min_new_tokens(), " is above ",
                     "max_new_tokens = ", max_new));
  }
  if (sampling.stop_size() > options_.max_stop_strings) {
    return absl::InvalidArgumentError(absl::StrCat("sampling.stop: ", sampling.stop_size(),
                                                   " strings exceed the limit of ",
                                                   options_.max_stop_strings));
  }
  for (const std::string& stop : sampling.stop()) {
    if (stop.empty()) return absl::InvalidArgumentError("sampling.stop has an empty string");
  }
  if (sampling.stop_size() > 0 && tokenizer_ == nullptr) {
    return absl::InvalidArgumentError("sampling.stop needs a tokenizer, and this server has none");
  }
  prepared.sampling = sampling;
  prepared.sampling.set_seed(resolved->seed);
  prepared.model_sampling = *resolved;
  prepared.stop = engine::StopConfig{
      .max_new_tokens = max_new,
      .eos_ids = eos_ids,
      .stop_ids =
          std::vector<int64_t>(sampling.stop_token_ids().begin(), sampling.stop_token_ids().end()),
      .stop_strings = std::vector<std::string>(sampling.stop().begin(), sampling.stop().end()),
      .ignore_eos = sampling.ignore_eos(),
      .min_new_tokens = sampling.min_new_tokens(),
      .include_stop_str_in_output = sampling.include_stop_str_in_output(),
      .skip_special_tokens = !sampling.has_skip_special_tokens() || sampling.skip_special_tokens()};

  const v1::SpeculationParams& speculation = request.speculation();
  const int64_t drafter_block = drafter.has_value() ? drafter->block_size() : 1;
  const int64_t default_block = options_.default_block_size > 0
                                    ? std::min(options_.default_block_size, drafter_block)
                                    : drafter_block;
  const int64_t block = speculation.has_block_size() ? speculation.block_size() : default_block;
  // Without a drafter every request is target-only, whatever block it asks for.
  absl::StatusOr<engine::DraftOptions> draft = engine::ResolveDraftOptions(
      {.block_size = drafter.has_value() ? block : std::min<int64_t>(block, 1),
       .window = speculation.has_draft_window() ? speculation.draft_window()
                                                : options_.default_draft_window,
       .min_confidence = speculation.min_draft_confidence()},
      // A window of 0 reaches the drafter, which resolves it to the one it was trained for.
      drafter_block, /*trained_window=*/0);
  if (!draft.ok()) return rpc::AtField("speculation", draft.status());
  prepared.draft = *draft;
  switch (speculation.draft_acceptance()) {
    case v1::DRAFT_ACCEPTANCE_UNSPECIFIED:
      prepared.draft.rejection_sampling = options_.rejection_sampling;
      break;
    case v1::DRAFT_ACCEPTANCE_MATCH:
      prepared.draft.rejection_sampling = false;
      break;
    case v1::DRAFT_ACCEPTANCE_REJECTION_SAMPLING:
      prepared.draft.rejection_sampling = true;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("speculation.draft_acceptance = ", speculation.draft_acceptance(),
                       " is not a DraftAcceptance"));
  }
  prepared.guarded =
      options_.speculation_guard && !speculation.has_block_size() && prepared.draft.block_size > 1;
  if (prepared.draft.block_size > 1) {
    prepared.tapped_layer_ids.assign(drafter->target_layer_ids().begin(),
                                     drafter->target_layer_ids().end());
  }
  return prepared;
}

absl::StatusOr<v1::GenerateResponse> GenerationHandler::Generate(const v1::GenerateRequest& request,
                                                                 const Cancelled& cancelled) {
  // The two requests have the same fields under the same numbers, so the wire form carries one
  // into the other.
  v1::GenerateStreamRequest stream_request;
  stream_request.ParseFromString(request.SerializeAsString());
  v1::GenerateResponse response;
  absl::Status status = Run(std::move(stream_request), cancelled,
                            [&response](const v1::GenerateStreamResponse& message) {
                              MergeStreamMessage(message, response);
                              return true;
                            });
  if (!status.ok()) return status;
  return response;
}

absl::Status GenerationHandler::GenerateStream(const v1::GenerateStreamRequest& request,
                                               const Cancelled& cancelled,
                                               const StreamWriter& write) {
  return Run(request, cancelled, write);
}

absl::Status GenerationHandler::Run(v1::GenerateStreamRequest request, const Cancelled& cancelled,
                                    const StreamWriter& write) {
  const Clock::time_point arrival = Clock::now();
  if (request.request_id().size() > kMaxRequestIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("request_id is longer than ", kMaxRequestIdBytes, " bytes"));
  }
  if (request.request_id().empty()) {
    request.set_request_id(absl::StrCat("req-", id_prefix_, "-", next_id_++));
  }
  auto flight = std::make_shared<InFlight>();
  {
    std::lock_guard lock(flights_mutex_);
    if (!flights_.emplace(request.request_id(), flight).second) {
      return absl::AlreadyExistsError(
          absl::StrCat("request_id \"", request.request_id(), "\" is already in flight"));
    }
  }
  absl::Status status = [&]() -> absl::Status {
    absl::StatusOr<engine::AdmissionQueue::Ticket> ticket =
        admission_.Admit(1, [&] { return cancelled() || flight->aborted; });
    if (!ticket.ok()) return ticket.status();
    absl::StatusOr<BackendPool::Lease> pair = backends_.Acquire();
    if (!pair.ok()) return pair.status();
    // A pair has joined, so the pool knows its target.
    absl::StatusOr<Prepared> prepared = Prepare(request, *backends_.target(), pair->drafter_info());
    if (!prepared.ok()) return prepared.status();
    return Decode(request, *prepared, *pair, *flight, cancelled, write, arrival);
  }();
  {
    std::lock_guard lock(flights_mutex_);
    flights_.erase(request.request_id());
  }
  return status;
}

absl::StatusOr<engine::RequestPorts> GenerationHandler::OpenPorts(
    const Prepared& prepared, const BackendPool::Lease& pair,
    const std::function<bool()>& cancelled) {
  std::optional<engine::DraftOptions> draft;
  if (prepared.draft.block_size > 1) draft = prepared.draft;
  if (engine::InProcessPair* in_process = pair.in_process(); in_process != nullptr) {
    // The pair sets the drafts' sampling from the request's.
    return in_process->Open({.prompt = prepared.prompt,
                             .sampling = prepared.model_sampling,
                             .stop = prepared.stop,
                             .top_logprobs = verifier::TopLogprobsOf(prepared.sampling)},
                            draft, cancelled);
  }
  v1::PrefillRequest prefill;
  prefill.set_session_id(absl::StrCat(id_prefix_, "-s", next_id_++));
  prefill.mutable_token_ids()->Assign(prepared.prompt.begin(), prepared.prompt.end());
  *prefill.mutable_sampling() = prepared.sampling;
  prefill.set_max_session_length(
      static_cast<uint32_t>(prepared.prompt.size() + prepared.stop.max_new_tokens));
  prefill.mutable_tapped_layer_ids()->Assign(prepared.tapped_layer_ids.begin(),
                                             prepared.tapped_layer_ids.end());
  if (draft.has_value() && draft->rejection_sampling) {
    draft->sampling = engine::DraftSamplingFor(prepared.model_sampling);
  }
  return OpenRemotePorts(pair.verifier(), pair.drafter(), std::move(prefill), draft);
}

absl::Status GenerationHandler::Decode(const v1::GenerateStreamRequest& request,
                                       const Prepared& prepared, const BackendPool::Lease& pair,
                                       InFlight& flight, const Cancelled& cancelled,
                                       const StreamWriter& write, Clock::time_point arrival) {
  const auto prompt_length = static_cast<int64_t>(prepared.prompt.size());
  RequestRecord record{.regime = prepared.regime,
                       .finished_reason = "error",
                       .prompt_tokens = prompt_length,
                       .generation_tokens = 0,
                       .time_to_first_token_s = -1,
                       .e2e_latency_s = 0};
  absl::Cleanup record_request = [&] {
    record.e2e_latency_s = SecondsBetween(arrival, Clock::now());
    metrics_.RecordRequest(record);
  };

  absl::StatusOr<engine::RequestPorts> ports =
      OpenPorts(prepared, pair, [&] { return cancelled() || flight.aborted; });
  if (!ports.ok()) return ports.status();
  std::optional<engine::SpeculationGuard::Request> guard;
  if (prepared.guarded)
    guard.emplace(pair.guard().Open(prepared.regime, prepared.draft.block_size,
                                    static_cast<int64_t>(prepared.prompt.size())));

  double draft_seconds = 0;
  double verify_seconds = 0;
  bool first_message = true;
  bool client_gone = false;
  v1::AcceptanceStats acceptance;  // as of the last step
  const Clock::time_point prefill_start = Clock::now();
  Clock::time_point first_token_time = prefill_start;
  Clock::time_point last_emission = prefill_start;
  // One stream message: the tokens and text of a step (if any), cumulative counts, and on the last
  // message why generation ended (with the stop that matched, from the `ended` output) and where
  // the time went.
  auto send = [&](const engine::DecodeStep* step, int64_t completion_tokens,
                  v1::FinishReason finish, const engine::GenerationOutput* ended) {
    v1::GenerateStreamResponse message;
    message.set_request_id(request.request_id());
    if (step != nullptr) {
      message.mutable_token_ids()->Assign(step->chunk.ids.begin(), step->chunk.ids.end());
      message.set_text(step->chunk.text);
      if (step->proposed > 0) message.add_acceptance_lengths(step->accepted + 1);
      for (const engine::TokenLogprob& logprob : step->logprobs) {
        *message.add_logprobs() = verifier::ToProto(logprob);
      }
    }
    message.mutable_usage()->set_prompt_tokens(static_cast<uint32_t>(prompt_length));
    message.mutable_usage()->set_completion_tokens(static_cast<uint32_t>(completion_tokens));
    *message.mutable_acceptance() = acceptance;
    message.set_regime(RegimeProto(prepared.regime));
    message.set_seed(prepared.sampling.seed());
    if (first_message && request.return_prompt_token_ids()) {
      message.mutable_prompt_token_ids()->Assign(prepared.prompt.begin(), prepared.prompt.end());
    }
    first_message = false;
    if (finish != v1::FINISH_REASON_UNSPECIFIED) {
      message.set_finish_reason(finish);
      const engine::StopReason reason =
          ended == nullptr ? engine::StopReason::kCancelled : ended->stop_reason();
      if (reason == engine::StopReason::kEos || reason == engine::StopReason::kStopToken) {
        message.mutable_stop_match()->set_token_id(static_cast<uint32_t>(ended->ids().back()));
      } else if (reason == engine::StopReason::kStopString) {
        message.mutable_stop_match()->set_stop_string(*ended->matched_stop_string());
      }
      v1::RequestTiming& timing = *message.mutable_timing();
      *timing.mutable_queue_time() = rpc::ToProtoDuration(prefill_start - arrival);
      *timing.mutable_time_to_first_token() = rpc::ToProtoDuration(first_token_time - arrival);
      *timing.mutable_decode_time() = rpc::ToProtoDuration(last_emission - first_token_time);
      *timing.mutable_draft_time() = rpc::ToProtoDuration(absl::Seconds(draft_seconds));
      *timing.mutable_verify_time() = rpc::ToProtoDuration(absl::Seconds(verify_seconds));
      const char* name = FinishReasonName(finish);
      record.finished_reason = name == nullptr ? "error" : name;
    }
    record.generation_tokens = completion_tokens;
    return write(message);
  };

  engine::DecodeHooks hooks;
  hooks.cancelled = [&] { return flight.aborted || cancelled(); };
  hooks.on_step = [&](const engine::DecodeStep& step, const engine::GenerationOutput& output,
                      const engine::AcceptanceStats& stats) {
    const Clock::time_point now = Clock::now();
    if (step.prefill) {
      first_token_time = now;
      record.time_to_first_token_s = SecondsBetween(arrival, now);
    } else {
      if (step.draft_ms.has_value()) {
        draft_seconds += *step.draft_ms / 1e3;
        metrics_.RecordDraftCall(prepared.regime, *step.draft_ms / 1e3);
      }
      if (!step.drafter_failure.ok()) {
        std::cerr << "orchestrator: request " << request.request_id()
                  << " continues target-only: " << step.drafter_failure << "\n";
        metrics_.RecordDrafterFallback();
      }
      verify_seconds += step.target_ms / 1e3;
      metrics_.RecordVerifyCall(prepared.regime, step.target_ms / 1e3);
      if (step.proposed > 0) {
        metrics_.RecordDraftedStep(prepared.regime, step.proposed, step.accepted);
      }
      if (step.guard.has_value()) metrics_.RecordGuardChoice(prepared.regime, *step.guard);
      metrics_.RecordInterTokenLatency(prepared.regime, SecondsBetween(last_emission, now));
    }
    last_emission = now;
    acceptance = AcceptanceProto(stats);
    const v1::FinishReason finish =
        output.stopped() ? FinishReasonOf(output.stop_reason()) : v1::FINISH_REASON_UNSPECIFIED;
    client_gone = !send(&step, output.size(), finish, &output);
    return !client_gone;
  };
  absl::StatusOr<engine::GenerationResult> result =
      engine::RunDecodeLoop(*ports->target, ports->draft.get(), tokenizer_, prepared.stop, hooks,
                            guard.has_value() ? &*guard : nullptr);
  if (!result.ok()) return result.status();
  if (result->stop_reason != engine::StopReason::kCancelled) return absl::OkStatus();
  record.finished_reason = "abort";
  if (client_gone) return absl::CancelledError("the client went away");
  if (flight.aborted) {
    send(nullptr, static_cast<int64_t>(result->ids.size()), v1::FINISH_REASON_ABORT, nullptr);
    return absl::OkStatus();
  }
  return absl::CancelledError("the client cancelled or its deadline passed");
}

v1::AbortResponse GenerationHandler::Abort(const v1::AbortRequest& request) {
  v1::AbortResponse response;
  std::lock_guard lock(flights_mutex_);
  if (auto found = flights_.find(request.request_id()); found != flights_.end()) {
    response.set_aborted(!found->second->aborted.exchange(true));
  }
  return response;
}

absl::StatusOr<v1::GetModelInfoResponse> GenerationHandler::GetModelInfo() {
  const std::optional<v1::TargetVerifierServiceInfoResponse> target = backends_.target();
  if (!target.has_value()) return absl::UnavailableError("no target verifier is serving yet");
  const std::optional<v1::DrafterServiceInfoResponse> drafter = backends_.AnyDrafterInfo();
  v1::GetModelInfoResponse info;
  info.set_model_name(options_.model_name);
  info.set_target_model(options_.target_model);
  info.set_target_quantization(target->quantization());
  info.set_vocab_size(target->vocab_size());
  info.set_max_context_length(target->max_session_length());
  *info.mutable_eos_token_ids() = target->eos_token_ids();
  if (drafter.has_value()) {
    info.set_drafter_model(options_.drafter_model);
    info.set_drafter_quantization(drafter->quantization());
    info.set_drafter_block_size(drafter->block_size());
    info.set_default_draft_window(static_cast<uint32_t>(options_.default_draft_window));
  }
  info.mutable_regime_thresholds()->set_short_max_tokens(
      static_cast<uint32_t>(options_.regimes.medium_from - 1));
  info.mutable_regime_thresholds()->set_medium_max_tokens(
      static_cast<uint32_t>(options_.regimes.long_from - 1));
  v1::SamplingParams& defaults = *info.mutable_default_sampling_params();
  defaults.set_temperature(1);
  defaults.set_top_p(1);
  defaults.set_top_k(0);
  defaults.set_min_p(0);
  defaults.set_repetition_penalty(1);
  defaults.set_presence_penalty(0);
  defaults.set_frequency_penalty(0);
  defaults.set_seed(0);
  defaults.set_max_new_tokens(target->max_session_length() - 1);
  defaults.set_min_new_tokens(0);
  defaults.set_ignore_eos(false);
  defaults.set_include_stop_str_in_output(false);
  defaults.set_skip_special_tokens(true);
  defaults.set_logprobs(false);
  defaults.set_top_logprobs(0);
  v1::SpeculationParams& speculation = *info.mutable_default_speculation_params();
  speculation.set_block_size(drafter.has_value() ? drafter->block_size() : 1);
  speculation.set_draft_window(static_cast<uint32_t>(options_.default_draft_window));
  speculation.set_min_draft_confidence(0);
  speculation.set_draft_acceptance(options_.rejection_sampling
                                       ? v1::DRAFT_ACCEPTANCE_REJECTION_SAMPLING
                                       : v1::DRAFT_ACCEPTANCE_MATCH);
  info.set_max_stop_strings(static_cast<uint32_t>(options_.max_stop_strings));
  info.set_max_top_logprobs(verifier::kMaxTopLogprobs);
  info.set_server_version("0.1.0");
  return info;
}

void GenerationHandler::Shutdown(absl::Duration drain) {
  admission_.Close();
  const absl::Time deadline = absl::Now() + drain;
  auto empty = [this] {
    std::lock_guard lock(flights_mutex_);
    return flights_.empty();
  };
  while (!empty() && absl::Now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  {
    std::lock_guard lock(flights_mutex_);
    for (auto& [id, flight] : flights_) flight->aborted = true;
  }
  while (!empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

}  // namespace specd::orchestrator
