#include "services/drafter/drafter_handler.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/clock.h"
#include "common/base/torch_errors.h"
#include "common/engine/target_session.h"
#include "common/rpc/draft_sampling_proto.h"
#include "common/rpc/proto_duration.h"
#include "common/rpc/random_id.h"
#include "common/rpc/status.h"
#include "services/drafter/mapped_context.h"

namespace specd::drafter {

struct DrafterHandler::Session {
  Session(int64_t context_width, engine::DraftBatcher& batcher)
      : context_width(context_width), membership(batcher.Join()) {}

  std::mutex mutex;  // calls on one session are serial by contract; this keeps a misuse safe
  int64_t context_width;
  std::unique_ptr<MappedContext> context;  // mapped at the first handle, in its memory
  std::optional<engine::CachePool::Reservation> memory;  // before `draft`: given back after it
  std::unique_ptr<engine::DraftSession> draft;           // sized to the mapped buffer's rows
  int64_t capacity = 0;                                  // positions `draft` holds at most
  std::string buffer;                                    // the buffer `draft` was projected from
  engine::DraftBatcher::Membership membership;
};

namespace {

// A buffer's identity across processes and restarts (TensorHandle's owner and buffer ids).
std::string BufferKey(const v1::TensorHandle& handle) {
  return absl::StrCat(handle.owner_instance_id(), "/", handle.buffer_id());
}

}  // namespace

absl::StatusOr<std::unique_ptr<DrafterHandler>> DrafterHandler::Create(
    ServedDrafter drafter, io::Qwen35TextConfig target_config, DrafterOptions options) {
  if (drafter.drafter == nullptr) return absl::InvalidArgumentError("no drafter to serve");
  if (absl::Status window = drafter.drafter->Resolve({.window = options.default_window}).status();
      !window.ok()) {
    return window;
  }
  if (options.max_sessions < 1) {
    return absl::InvalidArgumentError("the drafter needs max_sessions ≥ 1");
  }
  return std::unique_ptr<DrafterHandler>(
      new DrafterHandler(std::move(drafter), std::move(target_config), std::move(options)));
}

DrafterHandler::DrafterHandler(ServedDrafter drafter, io::Qwen35TextConfig target_config,
                               DrafterOptions options)
    : drafter_(std::move(drafter)),
      reads_rows_(!drafter_.drafter->TargetHiddenStates().empty()),
      target_config_(std::move(target_config)),
      options_(std::move(options)),
      instance_id_(rpc::NewInstanceId()),
      batcher_(*drafter_.drafter, options_.batching),
      sessions_(options_.max_sessions, options_.session_idle_timeout,
                [gauge = options_.open_sessions](size_t open) {
                  if (gauge != nullptr) gauge->Set(static_cast<double>(open));
                }) {}

DrafterHandler::~DrafterHandler() = default;

absl::StatusOr<std::shared_ptr<DrafterHandler::Session>> DrafterHandler::FindOrOpen(
    const std::string& session_id, bool& opened) {
  if (std::shared_ptr<Session> found = sessions_.Find(session_id)) return found;
  opened = true;
  const auto width = static_cast<int64_t>(drafter_.drafter->TargetHiddenStates().size()) *
                     target_config_.hidden_size;
  return sessions_.Insert(session_id, std::make_shared<Session>(width, batcher_));
}

absl::StatusOr<v1::DraftResponse> DrafterHandler::Draft(const v1::DraftRequest& request) {
  absl::StatusOr<engine::DraftOptions> options = drafter_.drafter->Resolve(
      {.block_size = request.block_size(),
       .window = request.has_window() ? request.window() : options_.default_window,
       .min_confidence = request.min_confidence(),
       .sampling = rpc::FromProto(request.sampling())});
  if (!options.ok()) return options.status();
  const int64_t anchor = request.anchor_token_id();
  if (absl::Status ids = engine::CheckTokenIds({&anchor, 1}, target_config_.vocab_size);
      !ids.ok()) {
    return rpc::AtField("anchor_token_id", ids);
  }
  bool opened = false;
  absl::StatusOr<std::shared_ptr<Session>> session = FindOrOpen(request.session_id(), opened);
  if (!session.ok()) return session.status();
  std::lock_guard lock((*session)->mutex);
  absl::StatusOr<v1::DraftResponse> response = RunDraft(**session, request, *options);
  // A refused first Draft opens nothing, and a failed forward may leave the cache part-way.
  if (!response.ok() && (opened || response.status().code() == absl::StatusCode::kInternal)) {
    sessions_.Erase(request.session_id());
  }
  return response;
}

absl::StatusOr<v1::DraftResponse> DrafterHandler::RunDraft(Session& session,
                                                           const v1::DraftRequest& request,
                                                           const engine::DraftOptions& options) {
  const base::Clock::time_point start = base::Clock::now();
  const v1::CommittedTokens& committed = request.committed();
  int64_t end = static_cast<int64_t>(committed.begin()) + committed.ids_size();
  int64_t capacity = request.max_session_length();
  if (reads_rows_) {
    if (session.context == nullptr ||
        session.context->memory() != request.context().memory_case()) {
      absl::StatusOr<std::unique_ptr<MappedContext>> mapped =
          NewMappedContext(request.context(), session.context_width);
      if (!mapped.ok()) return mapped.status();
      session.context = *std::move(mapped);
    }
    if (absl::Status accepted = session.context->Accept(request.context()); !accepted.ok()) {
      return accepted;
    }
    // Context projected from another buffer (a restarted verifier, a reused session id) is not
    // this one's.
    if (const std::string buffer = BufferKey(request.context()); buffer != session.buffer) {
      session.draft.reset();
      session.buffer = buffer;
    }
    if (drafter_.drafter->ReadsTokenIds() && request.context().token_range().end() != end) {
      return rpc::AtField(
          "committed", absl::InvalidArgumentError(
                           absl::StrCat("its ids end at position ", end, ", the context's rows at ",
                                        request.context().token_range().end())));
    }
    end = request.context().token_range().end();
    capacity = session.context->rows();
  } else if (end > capacity) {
    return rpc::AtField("max_session_length",
                        absl::InvalidArgumentError(
                            absl::StrCat(capacity, " is below the ", end,
                                         " committed positions (a drafter that maps no context "
                                         "buffer sizes its session by it)")));
  }
  v1::DraftResponse response;
  absl::Status drafted = base::CatchTorchErrors("draft", [&]() -> absl::Status {
    if (session.draft == nullptr || session.capacity < capacity) {
      session.draft.reset();
      session.memory.reset();
      if (options_.cache_pool != nullptr) {
        absl::StatusOr<engine::CachePool::Reservation> reserved =
            options_.cache_pool->TryReserve(drafter_.drafter->SessionFootprint(), capacity);
        if (!reserved.ok()) return reserved.status();
        session.memory.emplace(*std::move(reserved));
      }
      absl::StatusOr<std::unique_ptr<engine::DraftSession>> draft =
          drafter_.drafter->OpenSession(capacity);
      if (!draft.ok()) return draft.status();
      session.draft = *std::move(draft);
      session.capacity = capacity;
    }
    engine::DraftSession& draft = *session.draft;
    if (options.block_size <= 1) {
      // Nothing to draft: as the in-process draft port does, the context waits for the next
      // proposal, and the batcher does not wait for a session that is not drafting.
      session.membership = {};
      response.set_context_length(static_cast<uint32_t>(draft.length()));
      return absl::OkStatus();
    }
    if (!session.membership.joined()) session.membership = batcher_.Join();
    // Rows the verifier rewrote are taken in again, and so are rows of verifies this drafter was
    // not called for; they are projected straight from the mapped buffer (never copied).
    int64_t from = draft.length();
    if (reads_rows_) from = std::min<int64_t>(request.context().token_range().begin(), from);
    absl::StatusOr<engine::CommittedContext> context = ContextOf(session, request, from, end);
    if (!context.ok()) return context.status();
    engine::DraftForward forward;
    absl::StatusOr<engine::DraftProposal> proposal =
        batcher_.Propose({.session = &draft,
                          .context = {&*context, 1},
                          .anchor = request.anchor_token_id(),
                          .count = options.block_size - 1,
                          .options = options,
                          .report_confidence = request.return_confidence()},
                         &forward);
    response.set_forward_rows(static_cast<uint32_t>(forward.rows));
    response.set_forward_drafts(static_cast<uint32_t>(forward.drafts));
    *response.mutable_queue_time() = rpc::ToProtoDuration(absl::Milliseconds(forward.queued_ms));
    if (!proposal.ok()) return proposal.status();
    response.mutable_draft_token_ids()->Assign(proposal->tokens.begin(), proposal->tokens.end());
    response.mutable_confidence()->Assign(proposal->confidence.begin(), proposal->confidence.end());
    for (const engine::DraftDistribution& distribution : proposal->distributions) {
      *response.add_distributions() = rpc::ToProto(distribution);
    }
    response.set_context_length(static_cast<uint32_t>(draft.length()));
    return absl::OkStatus();
  });
  if (!drafted.ok()) return drafted;
  *response.mutable_compute_time() = rpc::ToProtoDuration(base::Clock::now() - start);
  return response;
}

absl::StatusOr<engine::CommittedContext> DrafterHandler::ContextOf(const Session& session,
                                                                   const v1::DraftRequest& request,
                                                                   int64_t from,
                                                                   int64_t end) const {
  engine::CommittedContext context{.begin = from, .ids = {}, .rows = {}};
  if (drafter_.drafter->ReadsTokenIds()) {
    const v1::CommittedTokens& committed = request.committed();
    if (committed.begin() > from) {
      return absl::FailedPreconditionError(
          absl::StrCat("committed: the ids begin at position ", committed.begin(),
                       " but the session needs them from position ", from,
                       " (a drafter that restarted has lost its sessions)"));
    }
    context.begin = committed.begin();
    context.ids.assign(committed.ids().begin(), committed.ids().end());
    if (absl::Status ids = engine::CheckTokenIds(context.ids, target_config_.vocab_size);
        !ids.ok()) {
      return rpc::AtField("committed.ids", ids);
    }
  }
  if (reads_rows_) {
    context.rows = session.context->Rows(context.begin, end);
  }
  return context;
}

absl::StatusOr<v1::DrafterServiceReleaseResponse> DrafterHandler::Release(
    const v1::DrafterServiceReleaseRequest& request) {
  v1::DrafterServiceReleaseResponse response;
  response.set_released(sessions_.Erase(request.session_id()));
  return response;
}

absl::StatusOr<v1::DrafterServiceInfoResponse> DrafterHandler::Info() {
  const engine::Drafter& drafter = *drafter_.drafter;
  v1::DrafterServiceInfoResponse info;
  info.set_instance_id(instance_id_);
  info.set_model_name(options_.model_name);
  info.set_quantization(options_.quantization);
  info.set_block_size(static_cast<uint32_t>(drafter.block_size()));
  info.set_max_block_size(static_cast<uint32_t>(drafter.block_size()));
  if (const model::DFlashDrafter* dflash = drafter_.dflash; dflash != nullptr) {
    const io::DFlashDraftConfig& config = dflash->config();
    info.set_mask_token_id(static_cast<uint32_t>(config.mask_token_id));
    info.mutable_target_layer_ids()->Assign(config.target_layer_ids.begin(),
                                            config.target_layer_ids.end());
    info.set_num_layers(static_cast<uint32_t>(config.num_hidden_layers));
    info.set_device(dflash->options().device.str());
  } else {
    info.set_device("cpu");
  }
  info.set_hidden_size(static_cast<uint32_t>(target_config_.hidden_size));
  info.set_vocab_size(static_cast<uint32_t>(target_config_.vocab_size));
  info.set_default_window(
      static_cast<uint32_t>(drafter.Resolve({.window = options_.default_window})->window));
  if (reads_rows_) {
    for (const v1::MemoryKind kind : MappableMemoryKinds()) info.add_memory_kinds(kind);
  }
  info.set_uses_shared_weights(options_.uses_shared_weights);
  info.set_max_sessions(static_cast<uint32_t>(options_.max_sessions));
  *info.mutable_session_idle_timeout() = rpc::ToProtoDuration(options_.session_idle_timeout);
  return info;
}

}  // namespace specd::drafter
