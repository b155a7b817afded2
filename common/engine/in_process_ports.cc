#include "common/engine/in_process_ports.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace specd::engine {
namespace {

BatchingOptions TakingTurns(BatchingOptions options, const std::shared_ptr<DeviceTurns>& turns) {
  if (options.turns == nullptr) options.turns = turns;
  return options;
}

}  // namespace

InProcessTargetPort::InProcessTargetPort(TargetSession session, TargetBatcher& batcher,
                                         std::optional<CachePool::Reservation> memory)
    : memory_(std::move(memory)),
      session_(std::move(session)),
      batcher_(batcher),
      membership_(batcher.Join()) {}

absl::StatusOr<EmittedTokens> InProcessTargetPort::Prefill() {
  return Keep(batcher_.Prefill(session_));
}

absl::StatusOr<EmittedTokens> InProcessTargetPort::Verify(const Drafts& drafts) {
  return Keep(batcher_.Verify(session_, drafts));
}

absl::StatusOr<EmittedTokens> InProcessTargetPort::Keep(absl::StatusOr<TargetStep> step) {
  if (!step.ok()) return step.status();
  pending_.push_back(std::move(step->context));
  return std::move(step->tokens);
}

std::vector<CommittedContext> InProcessTargetPort::TakeContext() {
  // Pieces that follow each other become one, so a drafter that skipped steps catches up in one
  // forward rather than one per step.
  std::vector<CommittedContext> merged;
  for (CommittedContext& piece : pending_) {
    CommittedContext* last = merged.empty() ? nullptr : &merged.back();
    if (last != nullptr && piece.begin == last->begin + static_cast<int64_t>(last->ids.size()) &&
        last->rows.defined() == piece.rows.defined()) {
      last->ids.insert(last->ids.end(), piece.ids.begin(), piece.ids.end());
      if (last->rows.defined()) last->rows = at::cat({last->rows, piece.rows});
    } else {
      merged.push_back(std::move(piece));
    }
  }
  pending_.clear();
  return merged;
}

InProcessDraftPort::InProcessDraftPort(InProcessTargetPort& target,
                                       std::unique_ptr<DraftSession> session,
                                       const DraftOptions& options, DraftBatcher& batcher)
    : target_(target),
      session_(std::move(session)),
      options_(options),
      batcher_(batcher),
      membership_(batcher.Join()) {}

absl::StatusOr<Drafts> InProcessDraftPort::Propose(int64_t anchor, int64_t max_tokens) {
  if (max_tokens <= 0) {
    // Nothing to draft: the context waits in the target port for the next proposal, taken in
    // then in one piece, and the batcher does not wait for a member that is not drafting.
    membership_ = {};
    return Drafts();
  }
  if (!membership_.joined()) membership_ = batcher_.Join();
  const std::vector<CommittedContext> context = target_.TakeContext();
  DraftForward forward;
  absl::StatusOr<DraftProposal> proposal =
      batcher_.Propose({.session = session_.get(),
                        .context = context,
                        .anchor = anchor,
                        .count = std::min(options_.block_size - 1, max_tokens),
                        .options = options_,
                        .report_confidence = false},
                       &forward);
  if (!proposal.ok()) return proposal.status();
  return Drafts{.tokens = std::move(proposal->tokens),
                .distributions = std::move(proposal->distributions),
                .forward = forward};
}

InProcessPair::InProcessPair(const model::Qwen35Model& target, const Drafter* drafter,
                             const PairOptions& options)
    : target_(target),
      drafter_(drafter),
      cache_pool_(options.cache_pool),
      turns_(options.target_batching.turns != nullptr ? options.target_batching.turns
                                                      : std::make_shared<DeviceTurns>()),
      target_batcher_(target, TakingTurns(options.target_batching, turns_)) {
  if (drafter_ != nullptr) {
    draft_batcher_.emplace(*drafter_, TakingTurns(options.draft_batching, turns_));
  }
}

BatchingStats InProcessPair::drafter_stats() const {
  return draft_batcher_.has_value() ? draft_batcher_->stats() : BatchingStats();
}

absl::StatusOr<RequestPorts> InProcessPair::Open(const GenerationRequest& request,
                                                 const std::optional<DraftOptions>& draft,
                                                 const std::function<bool()>& cancelled) {
  std::optional<DraftOptions> resolved;
  if (draft.has_value()) {
    if (drafter_ == nullptr) return absl::FailedPreconditionError("this pair has no drafter");
    absl::StatusOr<DraftOptions> checked = drafter_->Resolve(*draft);
    if (!checked.ok()) return checked.status();
    resolved = *checked;
    if (resolved->rejection_sampling) resolved->sampling = DraftSamplingFor(request.sampling);
  }
  const int64_t max_length =
      static_cast<int64_t>(request.prompt.size()) + request.stop.max_new_tokens;
  std::optional<CachePool::Reservation> memory;
  if (cache_pool_ != nullptr) {
    model::CacheFootprint footprint = target_.SequenceFootprint();
    if (resolved.has_value()) footprint = footprint + drafter_->SessionFootprint();
    absl::StatusOr<CachePool::Reservation> reserved =
        cache_pool_->Reserve(footprint, max_length, cancelled);
    if (!reserved.ok()) return reserved.status();
    memory.emplace(*std::move(reserved));
  }
  absl::StatusOr<TargetSession> session = TargetSession::Open(
      target_, {.prompt = request.prompt,
                .sampling = request.sampling,
                .ending_ids = EndingTokenIds(request.stop),
                .hidden_states =
                    resolved.has_value() ? drafter_->TargetHiddenStates() : std::vector<int64_t>(),
                .max_length = max_length,
                .top_logprobs = request.top_logprobs});
  if (!session.ok()) return session.status();
  auto target = std::make_unique<InProcessTargetPort>(*std::move(session), target_batcher_,
                                                      std::move(memory));
  RequestPorts ports;
  if (resolved.has_value()) {
    absl::StatusOr<std::unique_ptr<DraftSession>> draft_session = drafter_->OpenSession(max_length);
    if (!draft_session.ok()) return draft_session.status();
    ports.draft = std::make_unique<InProcessDraftPort>(*target, *std::move(draft_session),
                                                       *resolved, *draft_batcher_);
  }
  ports.target = std::move(target);
  return ports;
}

}  // namespace specd::engine
