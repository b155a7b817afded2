#include "services/orchestrator/generation_handler.h"

#include <algorithm>
#include <iostream>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/rpc/proto_duration.h"
#include "common/rpc/random_id.h"
#include "common/engine/elapsed.h"
#include "common/engine/generation_output.h"
#include "common/engine/stop_criteria.h"
#include "services/orchestrator/prompt.h"
#include "services/verifier/sampling_params.h"

namespace specd::orchestrator {
namespace {

using engine::Clock;

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

v1::FinishReason FinishReasonOf(engine::StopReason reason) {
  return reason == engine::StopReason::kMaxTokens ? v1::FINISH_REASON_LENGTH : v1::FINISH_REASON_STOP;
}

const char* FinishReasonLabel(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_STOP:
      return "stop";
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_ABORT:
      return "abort";
    default:
      return "error";
  }
}

}  // namespace

// A request checked and resolved against the server's defaults.
struct GenerationHandler::Prepared {
  std::vector<int64_t> prompt;
  engine::Regime regime = engine::Regime::kShort;
  v1::SamplingParams sampling;  // every distribution field and the seed resolved
  engine::StopConfig stop;
  int64_t block_size = 1;  // 1: target-only
  int64_t window = 0;
  float min_confidence = 0;
  std::vector<uint32_t> tapped_layer_ids;  // the drafter's, when speculating
};

absl::StatusOr<std::unique_ptr<GenerationHandler>> GenerationHandler::Create(
    BackendPool& backends, const text::Tokenizer* tokenizer, metrics::Registry& registry,
    OrchestratorOptions options) {
  std::optional<v1::TargetVerifierServiceInfoResponse> target = backends.target();
  if (!target.has_value()) return absl::UnavailableError("no target verifier is serving");
  if (options.max_running < 1 || options.max_waiting < 0) {
    return absl::InvalidArgumentError("max_running must be ≥ 1 and max_waiting ≥ 0");
  }
  return std::unique_ptr<GenerationHandler>(
      new GenerationHandler(backends, tokenizer, registry, std::move(options), *std::move(target)));
}

GenerationHandler::GenerationHandler(BackendPool& backends, const text::Tokenizer* tokenizer,
                                     metrics::Registry& registry, OrchestratorOptions options,
                                     v1::TargetVerifierServiceInfoResponse target)
    : backends_(backends),
      tokenizer_(tokenizer),
      chat_(options.chat_flavor),
      options_(std::move(options)),
      verifier_info_(std::move(target)),
      metrics_(registry, options_.model_name),
      admission_(options_.max_running, options_.max_waiting, metrics_.running(),
                 metrics_.waiting()),
      id_prefix_(rpc::NewInstanceId()) {}

absl::StatusOr<GenerationHandler::Prepared> GenerationHandler::Prepare(
    const v1::GenerateStreamRequest& request,
    const std::optional<v1::DrafterServiceInfoResponse>& drafter) {
  Prepared prepared;
  const int64_t max_context = verifier_info_.max_session_length();
  absl::StatusOr<std::vector<int64_t>> prompt =
      PromptIds(request.prompt(), tokenizer_, chat_,
                {.vocab_size = verifier_info_.vocab_size(), .max_prompt_tokens = max_context - 1});
  if (!prompt.ok()) return prompt.status();
  prepared.prompt = *std::move(prompt);
  const auto prompt_length = static_cast<int64_t>(prepared.prompt.size());
  prepared.regime = engine::ClassifyRegime(prompt_length, options_.regimes);

  const v1::SamplingParams& sampling = request.sampling();
  if (absl::Status valid =
          verifier::ToModelSampling(sampling, verifier_info_.vocab_size()).status();
      !valid.ok()) {
    return valid;
  }
  if (sampling.has_skip_special_tokens() && !sampling.skip_special_tokens()) {
    return absl::InvalidArgumentError(
        "sampling.skip_special_tokens = false is not supported by this server yet");
  }
  if (sampling.include_stop_str_in_output()) {
    return absl::InvalidArgumentError(
        "sampling.include_stop_str_in_output is not supported by this server yet");
  }
  const int64_t room = max_context - prompt_length;
  const int64_t max_new = sampling.has_max_new_tokens() ? sampling.max_new_tokens() : room;
  if (max_new < 1 || max_new > room) {
    return absl::InvalidArgumentError(absl::StrCat("sampling.max_new_tokens = ", max_new,
                                                   " is outside [1, ", room,
                                                   "] (the context left after the prompt)"));
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
  if (!sampling.has_seed()) prepared.sampling.set_seed(std::random_device()());
  prepared.stop = engine::StopConfig{
      .max_new_tokens = max_new,
      .eos_ids = std::vector<int64_t>(verifier_info_.eos_token_ids().begin(),
                                      verifier_info_.eos_token_ids().end()),
      .stop_ids =
          std::vector<int64_t>(sampling.stop_token_ids().begin(), sampling.stop_token_ids().end()),
      .stop_strings = std::vector<std::string>(sampling.stop().begin(), sampling.stop().end()),
      .ignore_eos = sampling.ignore_eos()};

  const v1::SpeculationParams& speculation = request.speculation();
  const int64_t drafter_block = drafter.has_value() ? drafter->block_size() : 1;
  const int64_t default_block = options_.default_block_size > 0
                                    ? std::min(options_.default_block_size, drafter_block)
                                    : drafter_block;
  const int64_t block = speculation.has_block_size() ? speculation.block_size() : default_block;
  if (speculation.has_block_size() &&
      (block < 1 || (drafter.has_value() && block > drafter_block))) {
    return absl::InvalidArgumentError(
        absl::StrCat("speculation.block_size = ", block, " is outside [1, ", drafter_block, "]"));
  }
  if (speculation.has_min_draft_confidence() &&
      !(speculation.min_draft_confidence() >= 0 && speculation.min_draft_confidence() <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("speculation.min_draft_confidence = ", speculation.min_draft_confidence(),
                     " is outside [0, 1]"));
  }
  prepared.block_size = drafter.has_value() ? block : 1;
  prepared.window =
      speculation.has_draft_window() ? speculation.draft_window() : options_.default_draft_window;
  prepared.min_confidence = speculation.min_draft_confidence();
  if (prepared.block_size > 1) {
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
  absl::Status status = Run(
      std::move(stream_request), cancelled, [&response](const v1::GenerateStreamResponse& message) {
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
    absl::StatusOr<AdmissionQueue::Ticket> ticket =
        admission_.Admit([&] { return cancelled() || flight->aborted; });
    if (!ticket.ok()) return ticket.status();
    absl::StatusOr<BackendPool::Lease> pair = backends_.Acquire();
    if (!pair.ok()) return pair.status();
    absl::StatusOr<Prepared> prepared = Prepare(request, pair->drafter_info());
    if (!prepared.ok()) return prepared.status();
    return Decode(request, *prepared, *pair, *flight, cancelled, write, arrival);
  }();
  {
    std::lock_guard lock(flights_mutex_);
    flights_.erase(request.request_id());
  }
  return status;
}

absl::Status GenerationHandler::Decode(const v1::GenerateStreamRequest& request,
                                       const Prepared& prepared, const BackendPool::Lease& pair,
                                       InFlight& flight, const Cancelled& cancelled,
                                       const StreamWriter& write, Clock::time_point arrival) {
  const std::string session_id = absl::StrCat(id_prefix_, "-s", next_id_++);
  const auto prompt_length = static_cast<int64_t>(prepared.prompt.size());
  bool speculate = prepared.block_size > 1;
  bool drafter_session = false;
  absl::Cleanup release = [&] {
    v1::TargetVerifierServiceReleaseRequest verifier_release;
    verifier_release.set_session_id(session_id);
    (void)pair.verifier().Release(verifier_release);
    if (drafter_session) {
      v1::DrafterServiceReleaseRequest drafter_release;
      drafter_release.set_session_id(session_id);
      (void)pair.drafter()->Release(drafter_release);
    }
  };
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

  v1::PrefillRequest prefill;
  prefill.set_session_id(session_id);
  prefill.mutable_token_ids()->Assign(prepared.prompt.begin(), prepared.prompt.end());
  *prefill.mutable_sampling() = prepared.sampling;
  prefill.set_max_session_length(
      static_cast<uint32_t>(prompt_length + prepared.stop.max_new_tokens));
  prefill.mutable_tapped_layer_ids()->Assign(prepared.tapped_layer_ids.begin(),
                                             prepared.tapped_layer_ids.end());
  const Clock::time_point prefill_start = Clock::now();
  absl::StatusOr<v1::PrefillResponse> prefilled = pair.verifier().Prefill(prefill);
  if (!prefilled.ok()) return prefilled.status();

  engine::GenerationOutput output(tokenizer_, prepared.stop);
  v1::AcceptanceStats acceptance;
  std::vector<uint32_t> new_acceptance_lengths;
  std::vector<v1::TokenLogprob> new_logprobs;  // one per token pushed since the last message
  double draft_seconds = 0;
  double verify_seconds = 0;
  bool first_message = true;
  const Clock::time_point first_token_time = Clock::now();
  Clock::time_point last_emission = first_token_time;
  // One stream message: the tokens and text since the last one, cumulative counts, and on the
  // last message why generation ended and where the time went.
  auto send = [&](v1::FinishReason finish) {
    v1::GenerateStreamResponse message;
    message.set_request_id(request.request_id());
    output.EmitChunk([&message](const engine::GenerationChunk& chunk) {
      message.mutable_token_ids()->Assign(chunk.ids.begin(), chunk.ids.end());
      message.set_text(chunk.text);
    });
    message.mutable_acceptance_lengths()->Assign(new_acceptance_lengths.begin(),
                                                 new_acceptance_lengths.end());
    new_acceptance_lengths.clear();
    for (v1::TokenLogprob& logprob : new_logprobs) *message.add_logprobs() = std::move(logprob);
    new_logprobs.clear();
    message.mutable_usage()->set_prompt_tokens(static_cast<uint32_t>(prompt_length));
    message.mutable_usage()->set_completion_tokens(static_cast<uint32_t>(output.size()));
    acceptance.set_mean_acceptance_length(
        acceptance.num_drafts() == 0
            ? 0
            : 1 + static_cast<double>(acceptance.num_accepted_tokens()) / acceptance.num_drafts());
    *message.mutable_acceptance() = acceptance;
    message.set_regime(RegimeProto(prepared.regime));
    message.set_seed(prefilled->seed());
    if (first_message && request.return_prompt_token_ids()) {
      message.mutable_prompt_token_ids()->Assign(prepared.prompt.begin(), prepared.prompt.end());
    }
    first_message = false;
    if (finish != v1::FINISH_REASON_UNSPECIFIED) {
      message.set_finish_reason(finish);
      if (output.stop_reason() == engine::StopReason::kEos ||
          output.stop_reason() == engine::StopReason::kStopToken) {
        message.mutable_stop_match()->set_token_id(static_cast<uint32_t>(output.ids().back()));
      } else if (output.stop_reason() == engine::StopReason::kStopString) {
        message.mutable_stop_match()->set_stop_string(*output.matched_stop_string());
      }
      v1::RequestTiming& timing = *message.mutable_timing();
      *timing.mutable_queue_time() = rpc::ToProtoDuration(prefill_start - arrival);
      *timing.mutable_time_to_first_token() = rpc::ToProtoDuration(first_token_time - arrival);
      *timing.mutable_decode_time() = rpc::ToProtoDuration(last_emission - first_token_time);
      *timing.mutable_draft_time() = rpc::ToProtoDuration(absl::Seconds(draft_seconds));
      *timing.mutable_verify_time() = rpc::ToProtoDuration(absl::Seconds(verify_seconds));
      record.finished_reason = FinishReasonLabel(finish);
    }
    record.generation_tokens = output.size();
    return write(message);
  };

  if (absl::StatusOr<bool> pushed = output.Push(prefilled->next_token_id()); !pushed.ok()) {
    return pushed.status();
  }
  if (prefilled->has_next_token_logprob()) new_logprobs.push_back(prefilled->next_token_logprob());
  record.time_to_first_token_s = SecondsBetween(arrival, first_token_time);
  uint64_t generation = prefilled->generation();
  v1::TensorHandle context = prefilled->context();
  if (output.stopped()) {
    send(FinishReasonOf(output.stop_reason()));
    return absl::OkStatus();
  }
  if (!send(v1::FINISH_REASON_UNSPECIFIED)) return absl::CancelledError("the client went away");

  while (!output.stopped()) {
    if (flight.aborted) {
      send(v1::FINISH_REASON_ABORT);
      return absl::OkStatus();
    }
    if (cancelled()) {
      record.finished_reason = "abort";
      return absl::CancelledError("the client cancelled or its deadline passed");
    }
    // The step emits at most one token per block position: drafts stop where the output must.
    const int64_t room = prepared.stop.max_new_tokens - output.size();
    std::vector<uint32_t> drafts;
    if (speculate) {
      v1::DraftRequest draft;
      draft.set_session_id(session_id);
      *draft.mutable_context() = context;
      draft.set_anchor_token_id(static_cast<uint32_t>(output.ids().back()));
      draft.set_block_size(static_cast<uint32_t>(prepared.block_size));
      draft.set_window(static_cast<uint32_t>(prepared.window));
      draft.set_min_confidence(prepared.min_confidence);
      drafter_session = true;
      const Clock::time_point start = Clock::now();
      absl::StatusOr<v1::DraftResponse> drafted = pair.drafter()->Draft(draft);
      const double seconds = SecondsBetween(start, Clock::now());
      draft_seconds += seconds;
      metrics_.RecordDraftCall(prepared.regime, seconds);
      if (drafted.ok()) {
        const int64_t kept = std::min<int64_t>(drafted->draft_token_ids_size(), room - 1);
        drafts.assign(drafted->draft_token_ids().begin(),
                      drafted->draft_token_ids().begin() + kept);
      } else {
        // The output never depends on the drafter, so losing it costs speed only.
        std::cerr << "orchestrator: request " << request.request_id()
                  << " continues target-only: " << drafted.status() << "\n";
        metrics_.RecordDrafterFallback();
        speculate = false;
      }
    }
    v1::VerifyRequest verify;
    verify.set_session_id(session_id);
    verify.set_expected_generation(generation);
    verify.mutable_draft_token_ids()->Assign(drafts.begin(), drafts.end());
    const Clock::time_point start = Clock::now();
    absl::StatusOr<v1::VerifyResponse> verified = pair.verifier().Verify(verify);
    const double seconds = SecondsBetween(start, Clock::now());
    verify_seconds += seconds;
    metrics_.RecordVerifyCall(prepared.regime, seconds);
    if (!verified.ok()) return verified.status();
    generation = verified->generation();
    context = verified->context();

    std::vector<int64_t> emitted(verified->accepted_token_ids().begin(),
                                 verified->accepted_token_ids().end());
    emitted.push_back(verified->next_token_id());
    for (size_t i = 0; i < emitted.size(); ++i) {
      absl::StatusOr<bool> stopped = output.Push(emitted[i]);
      if (!stopped.ok()) return stopped.status();
      if (static_cast<int>(i) < verified->logprobs_size()) {
        new_logprobs.push_back(verified->logprobs(static_cast<int>(i)));
      }
      if (*stopped) break;
    }
    const int64_t accepted = verified->accepted_token_ids_size();
    if (drafts.empty()) {
      acceptance.set_num_target_only_steps(acceptance.num_target_only_steps() + 1);
    } else {
      acceptance.set_num_drafts(acceptance.num_drafts() + 1);
      acceptance.set_num_draft_tokens(acceptance.num_draft_tokens() + drafts.size());
      acceptance.set_num_accepted_tokens(acceptance.num_accepted_tokens() + accepted);
      for (int64_t position = 0; position < accepted; ++position) {
        if (acceptance.accepted_per_position_size() <= position) {
          acceptance.add_accepted_per_position(0);
        }
        acceptance.set_accepted_per_position(position,
                                             acceptance.accepted_per_position(position) + 1);
      }
      new_acceptance_lengths.push_back(static_cast<uint32_t>(accepted + 1));
      metrics_.RecordDraftedStep(prepared.regime, static_cast<int64_t>(drafts.size()), accepted);
    }
    const Clock::time_point now = Clock::now();
    metrics_.RecordInterTokenLatency(prepared.regime, SecondsBetween(last_emission, now));
    last_emission = now;
    const v1::FinishReason finish =
        output.stopped() ? FinishReasonOf(output.stop_reason()) : v1::FINISH_REASON_UNSPECIFIED;
    if (!send(finish)) return absl::CancelledError("the client went away");
  }
  return absl::OkStatus();
}

v1::AbortResponse GenerationHandler::Abort(const v1::AbortRequest& request) {
  v1::AbortResponse response;
  std::lock_guard lock(flights_mutex_);
  if (auto found = flights_.find(request.request_id()); found != flights_.end()) {
    response.set_aborted(!found->second->aborted.exchange(true));
  }
  return response;
}

v1::GetModelInfoResponse GenerationHandler::GetModelInfo() {
  const std::optional<v1::DrafterServiceInfoResponse> drafter = backends_.AnyDrafterInfo();
  v1::GetModelInfoResponse info;
  info.set_model_name(options_.model_name);
  info.set_target_model(options_.target_model);
  info.set_target_quantization(verifier_info_.quantization());
  info.set_vocab_size(verifier_info_.vocab_size());
  info.set_max_context_length(verifier_info_.max_session_length());
  *info.mutable_eos_token_ids() = verifier_info_.eos_token_ids();
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
  defaults.set_max_new_tokens(verifier_info_.max_session_length() - 1);
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
