#include "services/verifier/verifier_handler.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/clock.h"
#include "common/engine/draft_acceptance.h"
#include "common/engine/stop_criteria.h"
#include "common/rpc/context_buffer.h"
#include "common/rpc/draft_sampling_proto.h"
#include "common/rpc/proto_duration.h"
#include "common/rpc/random_id.h"
#include "common/rpc/status.h"
#include "services/shared_weights/shared_token_head.h"
#include "services/verifier/context_rows.h"
#include "services/verifier/sampling_params.h"

namespace specd::verifier {
struct VerifierHandler::Session {
  Session(std::optional<engine::CachePool::Reservation> memory, engine::TargetSession target,
          engine::TargetBatcher& batcher)
      : memory(std::move(memory)), target(std::move(target)), membership(batcher.Join()) {}

  std::optional<engine::CachePool::Reservation> memory;  // first: given back last
  std::mutex mutex;  // calls on one session are serial by contract; this keeps a misuse safe
  engine::TargetSession target;
  engine::TargetBatcher::Membership membership;
  std::unique_ptr<ContextRows> context;  // null: no drafter reads hidden states
  uint64_t generation = 0;
};

absl::StatusOr<std::unique_ptr<VerifierHandler>> VerifierHandler::Create(
    const model::Qwen35Model& target, VerifierOptions options) {
  const io::Qwen35TextConfig& config = target.config();
  for (const int64_t layer : options.tapped_layer_ids) {
    if (layer < 0 || layer >= config.num_hidden_layers) {
      return absl::InvalidArgumentError(absl::StrCat("tapped layer ", layer, " is outside the ",
                                                     config.num_hidden_layers, " layers"));
    }
  }
  if (options.max_sessions < 1 || options.max_block_size < 1 || options.max_session_length < 2) {
    return absl::InvalidArgumentError(
        "the verifier needs max_sessions ≥ 1, max_block_size ≥ 1 and max_session_length ≥ 2");
  }
  if (config.max_position_embeddings > 0) {
    options.max_session_length =
        std::min<int64_t>(options.max_session_length, config.max_position_embeddings);
  }
  auto handler = std::unique_ptr<VerifierHandler>(new VerifierHandler(target, std::move(options)));
  absl::StatusOr<std::map<std::string, v1::TensorHandle>> shared = shared_weights::ShareTokenHead(
      target.token_head(), handler->instance_id_, handler->next_buffer_id_.fetch_add(2));
  if (!shared.ok()) return shared.status();
  handler->shared_weights_ = *std::move(shared);
  return handler;
}

VerifierHandler::VerifierHandler(const model::Qwen35Model& target, VerifierOptions options)
    : target_(target),
      options_(std::move(options)),
      instance_id_(rpc::NewInstanceId()),
      batcher_(target, options_.batching),
      sessions_(options_.max_sessions, options_.session_idle_timeout,
                [gauge = options_.open_sessions](size_t open) {
                  if (gauge != nullptr) gauge->Set(static_cast<double>(open));
                }) {}

VerifierHandler::~VerifierHandler() = default;

absl::StatusOr<std::shared_ptr<VerifierHandler::Session>> VerifierHandler::NewSession(
    const v1::PrefillRequest& request, const std::function<bool()>& cancelled) {
  const io::Qwen35TextConfig& config = target_.config();
  absl::StatusOr<model::SamplingParams> sampling =
      ToModelSampling(request.sampling(), config.vocab_size, config.eos_token_ids);
  if (!sampling.ok()) return sampling.status();
  const v1::SamplingParams& params = request.sampling();
  engine::TargetSessionOptions options{
      .prompt = std::vector<int64_t>(request.token_ids().begin(), request.token_ids().end()),
      .sampling = *sampling,
      .ending_ids = sampling->ending_ids,
      .hidden_states = {},
      .max_length =
          request.max_session_length() == 0
              ? options_.max_session_length
              : std::min<int64_t>(request.max_session_length(), options_.max_session_length),
      .top_logprobs = TopLogprobsOf(params)};
  const std::vector<int64_t> layers = request.tapped_layer_ids().empty()
                                          ? options_.tapped_layer_ids
                                          : std::vector<int64_t>(request.tapped_layer_ids().begin(),
                                                                 request.tapped_layer_ids().end());
  for (const int64_t layer : layers) {
    if (layer >= config.num_hidden_layers) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tapped_layer_ids has ", layer, ", outside the ", config.num_hidden_layers, " layers"));
    }
    options.hidden_states.push_back(layer + 1);  // hidden_states[0] is the embedding
  }
  const int64_t max_length = options.max_length;
  const auto taps = static_cast<int64_t>(options.hidden_states.size());
  std::optional<engine::CachePool::Reservation> memory;
  if (options_.cache_pool != nullptr) {
    // The caches, and the context buffer's rows (in the memory and dtype the model computes in).
    const model::CacheFootprint footprint =
        target_.SequenceFootprint() +
        model::CacheFootprint{
            .fixed_bytes = 0,
            .bytes_per_token = taps * config.hidden_size *
                               rpc::ContextElementBytes(ContextDtype(target_.options()))};
    absl::StatusOr<engine::CachePool::Reservation> reserved =
        options_.cache_pool->Reserve(footprint, max_length, cancelled);
    if (!reserved.ok()) return reserved.status();
    memory.emplace(*std::move(reserved));
  }
  absl::StatusOr<engine::TargetSession> target =
      engine::TargetSession::Open(target_, std::move(options));
  if (!target.ok()) {
    return target.status().code() == absl::StatusCode::kInvalidArgument
               ? rpc::AtField("token_ids", target.status())
               : target.status();
  }
  auto session = std::make_shared<Session>(std::move(memory), *std::move(target), batcher_);
  if (taps > 0) {
    absl::StatusOr<std::unique_ptr<ContextRows>> buffer = OpenContextRows(
        instance_id_, next_buffer_id_++, max_length, taps * config.hidden_size, target_.options());
    if (!buffer.ok()) return buffer.status();
    session->context = *std::move(buffer);
  }
  return session;
}

absl::StatusOr<v1::PrefillResponse> VerifierHandler::Prefill(const v1::PrefillRequest& request) {
  return PrefillCancellable(request, [] { return false; });
}

absl::StatusOr<v1::PrefillResponse> VerifierHandler::PrefillCancellable(
    const v1::PrefillRequest& request, const std::function<bool()>& cancelled) {
  absl::StatusOr<std::shared_ptr<Session>> session = NewSession(request, cancelled);
  if (!session.ok()) return session.status();
  absl::StatusOr<std::shared_ptr<Session>> inserted =
      sessions_.Insert(request.session_id(), *session);
  if (!inserted.ok()) return inserted.status();
  std::lock_guard lock((*session)->mutex);
  absl::StatusOr<v1::PrefillResponse> response = RunPrefill(**session);
  if (!response.ok()) sessions_.Erase(request.session_id());
  return response;
}

absl::StatusOr<v1::PrefillResponse> VerifierHandler::RunPrefill(Session& session) {
  const base::Clock::time_point start = base::Clock::now();
  absl::StatusOr<engine::TargetStep> step = batcher_.Prefill(session.target);
  if (!step.ok()) return step.status();
  v1::PrefillResponse response;
  absl::StatusOr<v1::TensorHandle> context = PublishRows(session, step->context);
  if (!context.ok()) return context.status();
  if (session.context != nullptr) *response.mutable_context() = *std::move(context);
  response.set_next_token_id(static_cast<uint32_t>(step->tokens.ids.front()));
  if (!step->tokens.logprobs.empty()) {
    *response.mutable_next_token_logprob() = ToProto(step->tokens.logprobs.front());
  }
  response.set_seed(session.target.seed());
  response.set_generation(session.generation);
  *response.mutable_compute_time() = rpc::ToProtoDuration(base::Clock::now() - start);
  return response;
}

absl::StatusOr<v1::VerifyResponse> VerifierHandler::Verify(const v1::VerifyRequest& request) {
  std::shared_ptr<Session> session = sessions_.Find(request.session_id());
  if (session == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no session \"", request.session_id(), "\" (never opened, or expired)"));
  }
  std::lock_guard lock(session->mutex);
  if (request.expected_generation() != session->generation) {
    return absl::AbortedError(absl::StrCat("expected generation ", request.expected_generation(),
                                           " but the session is at ", session->generation));
  }
  if (request.draft_token_ids_size() > options_.max_block_size - 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft_token_ids: ", request.draft_token_ids_size(),
                     " drafts exceed the block of ", options_.max_block_size));
  }
  absl::StatusOr<v1::VerifyResponse> response = RunVerify(*session, request);
  if (!response.ok() && response.status().code() == absl::StatusCode::kInternal) {
    sessions_.Erase(request.session_id());  // its cache may be part-way through a forward
  }
  return response;
}

absl::StatusOr<v1::VerifyResponse> VerifierHandler::RunVerify(Session& session,
                                                              const v1::VerifyRequest& request) {
  const base::Clock::time_point start = base::Clock::now();
  engine::Drafts drafts{.tokens = std::vector<int64_t>(request.draft_token_ids().begin(),
                                                       request.draft_token_ids().end()),
                        .distributions = {}};
  for (const v1::DraftDistribution& distribution : request.draft_distributions()) {
    drafts.distributions.push_back(rpc::FromProto(distribution));
  }
  if (absl::Status checked = engine::CheckDraftDistributions(drafts, target_.config().vocab_size);
      !checked.ok()) {
    return rpc::AtField("draft_distributions", checked);
  }
  absl::StatusOr<engine::TargetStep> step = batcher_.Verify(session.target, drafts);
  if (!step.ok()) {
    return step.status().code() == absl::StatusCode::kInvalidArgument
               ? rpc::AtField("draft_token_ids", step.status())
               : step.status();
  }
  v1::VerifyResponse response;
  absl::StatusOr<v1::TensorHandle> context = PublishRows(session, step->context);
  if (!context.ok()) return context.status();
  if (session.context != nullptr) *response.mutable_context() = *std::move(context);
  response.mutable_accepted_token_ids()->Assign(step->tokens.ids.begin(),
                                                step->tokens.ids.end() - 1);
  response.set_next_token_id(static_cast<uint32_t>(step->tokens.ids.back()));
  for (const engine::TokenLogprob& logprob : step->tokens.logprobs) {
    *response.add_logprobs() = ToProto(logprob);
  }
  response.set_generation(session.generation);
  const engine::TargetForward& forward = step->tokens.forward;
  response.set_forward_rows(static_cast<uint32_t>(forward.rows));
  response.set_forward_sequences(static_cast<uint32_t>(forward.sequences));
  response.set_forward_logit_rows(static_cast<uint32_t>(forward.logit_rows));
  response.set_forward_replayed_rows(static_cast<uint32_t>(forward.replayed_rows));
  *response.mutable_queue_time() = rpc::ToProtoDuration(absl::Milliseconds(forward.queued_ms));
  *response.mutable_compute_time() = rpc::ToProtoDuration(base::Clock::now() - start);
  return response;
}

absl::StatusOr<v1::TensorHandle> VerifierHandler::PublishRows(
    Session& session, const engine::CommittedContext& context) {
  ++session.generation;
  if (session.context == nullptr) return v1::TensorHandle();
  absl::StatusOr<v1::TensorHandle> handle = session.context->Publish(context.begin, context.rows);
  if (!handle.ok()) return handle.status();
  session.generation = handle->generation();
  return handle;
}

absl::StatusOr<v1::TargetVerifierServiceReleaseResponse> VerifierHandler::Release(
    const v1::TargetVerifierServiceReleaseRequest& request) {
  v1::TargetVerifierServiceReleaseResponse response;
  response.set_released(sessions_.Erase(request.session_id()));
  return response;
}

absl::StatusOr<v1::TargetVerifierServiceInfoResponse> VerifierHandler::Info() {
  const io::Qwen35TextConfig& config = target_.config();
  v1::TargetVerifierServiceInfoResponse info;
  info.set_instance_id(instance_id_);
  info.set_model_name(options_.model_name);
  info.set_quantization(options_.quantization);
  info.set_vocab_size(static_cast<uint32_t>(config.vocab_size));
  info.set_hidden_size(static_cast<uint32_t>(config.hidden_size));
  info.set_num_layers(static_cast<uint32_t>(config.num_hidden_layers));
  info.mutable_tapped_layer_ids()->Assign(options_.tapped_layer_ids.begin(),
                                          options_.tapped_layer_ids.end());
  info.set_context_dtype(ContextDtype(target_.options()));
  info.set_memory_kind(ContextMemoryKind(target_.options()));
  info.set_device(target_.options().device.str());
  info.mutable_eos_token_ids()->Assign(config.eos_token_ids.begin(), config.eos_token_ids.end());
  info.set_max_sessions(static_cast<uint32_t>(options_.max_sessions));
  info.set_max_session_length(static_cast<uint32_t>(options_.max_session_length));
  info.set_max_block_size(static_cast<uint32_t>(options_.max_block_size));
  *info.mutable_session_idle_timeout() = rpc::ToProtoDuration(options_.session_idle_timeout);
  info.mutable_shared_weights()->insert(shared_weights_.begin(), shared_weights_.end());
  return info;
}

}  // namespace specd::verifier
