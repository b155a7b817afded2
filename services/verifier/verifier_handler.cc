#include "services/verifier/verifier_handler.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <optional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rpc/context_buffer.h"
#include "common/rpc/proto_duration.h"
#include "common/rpc/random_id.h"
#include "common/engine/draft_acceptance.h"
#include "common/engine/elapsed.h"
#include "services/verifier/sampling_params.h"

namespace specd::verifier {
namespace {

absl::Status CheckIds(const google::protobuf::RepeatedField<uint32_t>& ids, int64_t vocab_size,
                      const char* field) {
  for (const uint32_t id : ids) {
    if (id >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " has id ", id, ", outside the vocabulary of ", vocab_size));
    }
  }
  return absl::OkStatus();
}

// Log-probabilities of `tokens`, one per row of `logits` [rows ≥ tokens, vocab], from the
// target's raw distribution (before penalties and temperature), with the `top` most likely
// alternatives of each row.
std::vector<v1::TokenLogprob> TokenLogprobs(const at::Tensor& logits,
                                            const std::vector<int64_t>& tokens, int64_t top) {
  const at::Tensor log_probabilities =
      at::log_softmax(logits.narrow(0, 0, static_cast<int64_t>(tokens.size())).to(at::kFloat), -1)
          .cpu();
  std::vector<v1::TokenLogprob> out(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const at::Tensor row = log_probabilities[static_cast<int64_t>(i)];
    out[i].set_token_id(static_cast<uint32_t>(tokens[i]));
    out[i].set_logprob(row[tokens[i]].item<float>());
    if (top > 0) {
      const auto [values, ids] = row.topk(top);
      for (int64_t k = 0; k < top; ++k) {
        v1::TokenLogprob::Candidate& candidate = *out[i].add_top_logprobs();
        candidate.set_token_id(static_cast<uint32_t>(ids[k].item<int64_t>()));
        candidate.set_logprob(values[k].item<float>());
      }
    }
  }
  return out;
}

}  // namespace

struct VerifierHandler::Session {
  Session(model::Qwen35Cache cache, const model::SamplingParams& sampling,
          std::vector<int64_t> prompt)
      : cache(std::move(cache)),
        sampler(sampling),
        seed(sampling.seed),
        prompt(std::move(prompt)) {}

  std::mutex mutex;  // calls on one session are serial by contract; this keeps a misuse safe
  model::Qwen35Cache cache;
  model::Sampler sampler;
  uint64_t seed;
  std::vector<int64_t> prompt;
  std::vector<int64_t> generated;  // emitted tokens; the last is the pending anchor
  std::vector<int64_t> taps;       // ForwardOptions::hidden_states indices (layer + 1)
  std::vector<int64_t> stop_ids;   // end acceptance: EOS (unless ignore_eos) and stop ids
  std::optional<rpc::ContextBuffer> context;
  uint64_t generation = 0;
  bool logprobs = false;
  int64_t top_logprobs = 0;
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
  return std::unique_ptr<VerifierHandler>(new VerifierHandler(target, std::move(options)));
}

VerifierHandler::VerifierHandler(const model::Qwen35Model& target, VerifierOptions options)
    : target_(target),
      options_(std::move(options)),
      instance_id_(rpc::NewInstanceId()),
      sessions_(options_.max_sessions, options_.session_idle_timeout,
                [gauge = options_.open_sessions](size_t open) {
                  if (gauge != nullptr) gauge->Set(static_cast<double>(open));
                }) {}

VerifierHandler::~VerifierHandler() = default;

absl::StatusOr<std::shared_ptr<VerifierHandler::Session>> VerifierHandler::NewSession(
    const v1::PrefillRequest& request) {
  const io::Qwen35TextConfig& config = target_.config();
  if (request.token_ids().empty()) {
    return absl::InvalidArgumentError("token_ids: the prompt is empty");
  }
  if (absl::Status ids = CheckIds(request.token_ids(), config.vocab_size, "token_ids"); !ids.ok()) {
    return ids;
  }
  const int64_t max_length =
      request.max_session_length() == 0
          ? options_.max_session_length
          : std::min<int64_t>(request.max_session_length(), options_.max_session_length);
  // The prompt and at least the first generated token.
  if (request.token_ids_size() + 1 > max_length) {
    return absl::OutOfRangeError(absl::StrCat("a prompt of ", request.token_ids_size(),
                                              " tokens leaves no room in a session of ",
                                              max_length));
  }
  absl::StatusOr<model::SamplingParams> sampling =
      ToModelSampling(request.sampling(), config.vocab_size);
  if (!sampling.ok()) return sampling.status();
  sampling->seed =
      request.sampling().has_seed() ? request.sampling().seed() : std::random_device()();

  absl::StatusOr<model::Qwen35Cache> cache = target_.NewCache(max_length);
  if (!cache.ok()) return cache.status();
  auto session = std::make_shared<Session>(
      *std::move(cache), *sampling,
      std::vector<int64_t>(request.token_ids().begin(), request.token_ids().end()));
  session->stop_ids.assign(request.sampling().stop_token_ids().begin(),
                           request.sampling().stop_token_ids().end());
  session->logprobs = request.sampling().logprobs();
  session->top_logprobs = request.sampling().top_logprobs();
  if (!request.sampling().ignore_eos()) {
    session->stop_ids.insert(session->stop_ids.end(), config.eos_token_ids.begin(),
                             config.eos_token_ids.end());
  }
  const std::vector<int64_t> layers = request.tapped_layer_ids().empty()
                                          ? options_.tapped_layer_ids
                                          : std::vector<int64_t>(request.tapped_layer_ids().begin(),
                                                                 request.tapped_layer_ids().end());
  for (const int64_t layer : layers) {
    if (layer >= config.num_hidden_layers) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tapped_layer_ids has ", layer, ", outside the ", config.num_hidden_layers, " layers"));
    }
    session->taps.push_back(layer + 1);  // hidden_states[0] is the embedding
  }
  if (!session->taps.empty()) {
    absl::StatusOr<rpc::ContextBuffer> buffer =
        rpc::ContextBuffer::Create(instance_id_, next_buffer_id_++, max_length,
                                   static_cast<int64_t>(session->taps.size()) * config.hidden_size);
    if (!buffer.ok()) return buffer.status();
    session->context = *std::move(buffer);
  }
  return session;
}

absl::StatusOr<v1::PrefillResponse> VerifierHandler::Prefill(const v1::PrefillRequest& request) {
  absl::StatusOr<std::shared_ptr<Session>> session = NewSession(request);
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
  const engine::Clock::time_point start = engine::Clock::now();
  v1::PrefillResponse response;
  try {
    std::lock_guard compute(compute_mutex_);
    absl::StatusOr<model::ForwardOutput> prefill =
        target_.Prefill(session.prompt, session.cache,
                        {.logit_rows = model::LogitRows::kLast, .hidden_states = session.taps});
    if (!prefill.ok()) return prefill.status();
    const int64_t first = session.sampler.Sample(prefill->logits.select(0, 0), session.prompt, {});
    session.generated.push_back(first);
    if (session.logprobs) {
      *response.mutable_next_token_logprob() =
          TokenLogprobs(prefill->logits, {first}, session.top_logprobs).front();
    }
    absl::StatusOr<v1::TensorHandle> context = PublishRows(
        session, prefill->hidden_states, 0, static_cast<int64_t>(session.prompt.size()));
    if (!context.ok()) return context.status();
    if (session.context.has_value()) *response.mutable_context() = *std::move(context);
    response.set_next_token_id(static_cast<uint32_t>(first));
  } catch (const c10::Error& error) {
    return absl::InternalError(absl::StrCat("prefill failed: ", error.what_without_backtrace()));
  }
  response.set_seed(session.seed);
  response.set_generation(session.generation);
  *response.mutable_compute_time() = rpc::ToProtoDuration(engine::Clock::now() - start);
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
  if (absl::Status ids =
          CheckIds(request.draft_token_ids(), target_.config().vocab_size, "draft_token_ids");
      !ids.ok()) {
    return ids;
  }
  // The session holds its cached positions and the pending anchor; the step may emit a token
  // per block position.
  const int64_t block_length = request.draft_token_ids_size() + 1;
  const int64_t session_length = session->cache.length() + 1;
  if (session_length + block_length > session->cache.max_length()) {
    return absl::OutOfRangeError(
        absl::StrCat("a block of ", block_length, " does not fit: ", session_length,
                     " of the session's ", session->cache.max_length(), " tokens are used"));
  }
  absl::StatusOr<v1::VerifyResponse> response = RunVerify(*session, request);
  if (!response.ok() && response.status().code() == absl::StatusCode::kInternal) {
    sessions_.Erase(request.session_id());  // its cache may be part-way through a forward
  }
  return response;
}

absl::StatusOr<v1::VerifyResponse> VerifierHandler::RunVerify(Session& session,
                                                              const v1::VerifyRequest& request) {
  const engine::Clock::time_point start = engine::Clock::now();
  std::vector<int64_t> block = {session.generated.back()};
  block.insert(block.end(), request.draft_token_ids().begin(), request.draft_token_ids().end());
  const int64_t anchor_position = session.cache.length();
  v1::VerifyResponse response;
  try {
    std::lock_guard compute(compute_mutex_);
    absl::StatusOr<model::ForwardOutput> verify =
        target_.ForwardBlock(block, session.cache,
                             {.logit_rows = model::LogitRows::kAll, .hidden_states = session.taps});
    if (!verify.ok()) return verify.status();
    absl::StatusOr<int64_t> accepted =
        engine::AcceptDrafts(verify->logits, block, session.sampler, session.prompt,
                           session.generated, [&session](int64_t token) -> absl::StatusOr<bool> {
                             session.generated.push_back(token);
                             return std::find(session.stop_ids.begin(), session.stop_ids.end(),
                                              token) != session.stop_ids.end();
                           });
    if (!accepted.ok()) return accepted.status();
    const int64_t committed = *accepted + 1;  // the anchor and the accepted drafts
    if (absl::Status rolled = session.cache.Rollback(committed); !rolled.ok()) return rolled;
    absl::StatusOr<v1::TensorHandle> context =
        PublishRows(session, verify->hidden_states, anchor_position, committed);
    if (!context.ok()) return context.status();
    if (session.context.has_value()) *response.mutable_context() = *std::move(context);
    response.mutable_accepted_token_ids()->Assign(block.begin() + 1, block.begin() + 1 + *accepted);
    response.set_next_token_id(static_cast<uint32_t>(session.generated.back()));
    if (session.logprobs) {
      const std::vector<int64_t> emitted(session.generated.end() - committed,
                                         session.generated.end());
      for (v1::TokenLogprob& logprob :
           TokenLogprobs(verify->logits, emitted, session.top_logprobs)) {
        *response.add_logprobs() = std::move(logprob);
      }
    }
  } catch (const c10::Error& error) {
    return absl::InternalError(absl::StrCat("verify failed: ", error.what_without_backtrace()));
  }
  response.set_generation(session.generation);
  *response.mutable_compute_time() = rpc::ToProtoDuration(engine::Clock::now() - start);
  return response;
}

absl::StatusOr<v1::TensorHandle> VerifierHandler::PublishRows(
    Session& session, const std::vector<at::Tensor>& hidden_states, int64_t begin, int64_t count) {
  ++session.generation;
  if (!session.context.has_value()) return v1::TensorHandle();
  // The taps side by side, in tapped-layer order: the rows the drafter's `fc` takes.
  const at::Tensor rows =
      at::cat(hidden_states, /*dim=*/1).narrow(0, 0, count).to(at::kFloat).cpu().contiguous();
  if (absl::Status written = session.context->WriteRows(begin, rows.data_ptr<float>(), count);
      !written.ok()) {
    return written;
  }
  v1::TensorHandle handle = session.context->Publish(begin, begin + count);
  session.generation = handle.generation();
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
  info.set_context_dtype(v1::DTYPE_FLOAT32);
  info.set_memory_kind(v1::MEMORY_KIND_POSIX_SHM);
  info.set_device(target_.options().device.str());
  info.mutable_eos_token_ids()->Assign(config.eos_token_ids.begin(), config.eos_token_ids.end());
  info.set_max_sessions(static_cast<uint32_t>(options_.max_sessions));
  info.set_max_session_length(static_cast<uint32_t>(options_.max_session_length));
  info.set_max_block_size(static_cast<uint32_t>(options_.max_block_size));
  *info.mutable_session_idle_timeout() = rpc::ToProtoDuration(options_.session_idle_timeout);
  return info;
}

}  // namespace specd::verifier
