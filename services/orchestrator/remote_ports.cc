#include "services/orchestrator/remote_ports.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rpc/draft_sampling_proto.h"
#include "common/rpc/proto_duration.h"
#include "services/verifier/sampling_params.h"

namespace specd::orchestrator {

RemoteTargetPort::RemoteTargetPort(verifier::VerifierApi& verifier, v1::PrefillRequest prefill)
    : verifier_(verifier), prefill_(std::move(prefill)) {}

RemoteTargetPort::~RemoteTargetPort() {
  v1::TargetVerifierServiceReleaseRequest release;
  release.set_session_id(prefill_.session_id());
  (void)verifier_.Release(release);
}

absl::StatusOr<engine::EmittedTokens> RemoteTargetPort::Prefill() {
  absl::StatusOr<v1::PrefillResponse> response = verifier_.Prefill(prefill_);
  if (!response.ok()) return response.status();
  generation_ = response->generation();
  context_ = response->context();
  committed_.assign(prefill_.token_ids().begin(), prefill_.token_ids().end());
  anchor_ = response->next_token_id();
  engine::EmittedTokens tokens{.ids = {response->next_token_id()}, .logprobs = {}};
  if (response->has_next_token_logprob()) {
    tokens.logprobs.push_back(verifier::FromProto(response->next_token_logprob()));
  }
  return tokens;
}

absl::StatusOr<engine::EmittedTokens> RemoteTargetPort::Verify(const engine::Drafts& drafts) {
  v1::VerifyRequest request;
  request.set_session_id(prefill_.session_id());
  request.set_expected_generation(generation_);
  request.mutable_draft_token_ids()->Assign(drafts.tokens.begin(), drafts.tokens.end());
  for (const engine::DraftDistribution& distribution : drafts.distributions) {
    *request.add_draft_distributions() = rpc::ToProto(distribution);
  }
  absl::StatusOr<v1::VerifyResponse> response = verifier_.Verify(request);
  if (!response.ok()) return response.status();
  generation_ = response->generation();
  context_ = response->context();
  committed_.push_back(anchor_);
  committed_.insert(committed_.end(), response->accepted_token_ids().begin(),
                    response->accepted_token_ids().end());
  anchor_ = response->next_token_id();
  engine::EmittedTokens tokens{
      .ids = std::vector<int64_t>(response->accepted_token_ids().begin(),
                                  response->accepted_token_ids().end()),
      .logprobs = {},
      .forward = {.rows = response->forward_rows(),
                  .sequences = response->forward_sequences(),
                  .logit_rows = response->forward_logit_rows(),
                  .replayed_rows = response->forward_replayed_rows(),
                  .queued_ms = rpc::ToMilliseconds(response->queue_time())}};
  tokens.ids.push_back(response->next_token_id());
  for (const v1::TokenLogprob& logprob : response->logprobs()) {
    tokens.logprobs.push_back(verifier::FromProto(logprob));
  }
  return tokens;
}

RemoteDraftPort::RemoteDraftPort(drafter::DrafterApi& drafter, const RemoteTargetPort& target,
                                 const engine::DraftOptions& options)
    : drafter_(drafter), target_(target), options_(options) {}

RemoteDraftPort::~RemoteDraftPort() {
  if (!opened_) return;
  v1::DrafterServiceReleaseRequest release;
  release.set_session_id(target_.session_id());
  (void)drafter_.Release(release);
}

absl::StatusOr<engine::Drafts> RemoteDraftPort::Propose(int64_t anchor, int64_t max_tokens) {
  v1::DraftRequest request;
  request.set_session_id(target_.session_id());
  *request.mutable_context() = target_.context();
  request.set_anchor_token_id(static_cast<uint32_t>(anchor));
  // A block of one drafts nothing: the drafter keeps its session, and the context for later.
  request.set_block_size(static_cast<uint32_t>(max_tokens > 0 ? options_.block_size : 1));
  request.set_window(static_cast<uint32_t>(options_.window));
  request.set_min_confidence(static_cast<float>(options_.min_confidence));
  if (options_.sampling.temperature > 0)
    *request.mutable_sampling() = rpc::ToProto(options_.sampling);
  // The ids from where the drafter's session ends, or from the first row the verifier rewrote.
  const std::span<const uint32_t> committed = target_.committed();
  int64_t from = std::min<int64_t>(drafter_length_, static_cast<int64_t>(committed.size()));
  if (target_.context().has_token_range()) {
    from = std::min<int64_t>(from, target_.context().token_range().begin());
  }
  request.mutable_committed()->set_begin(static_cast<uint32_t>(from));
  request.mutable_committed()->mutable_ids()->Assign(committed.begin() + from, committed.end());
  request.set_max_session_length(target_.max_session_length());
  opened_ = true;
  absl::StatusOr<v1::DraftResponse> response = drafter_.Draft(request);
  if (response.status().code() == absl::StatusCode::kFailedPrecondition && from > 0) {
    // A drafter that restarted holds none of the request's ids: once, all of them.
    request.mutable_committed()->set_begin(0);
    request.mutable_committed()->mutable_ids()->Assign(committed.begin(), committed.end());
    response = drafter_.Draft(request);
  }
  if (!response.ok()) return response.status();
  drafter_length_ = response->context_length();
  if (response->distributions_size() > 0 &&
      response->distributions_size() != response->draft_token_ids_size()) {
    return absl::InternalError(absl::StrCat("the drafter sent ", response->distributions_size(),
                                            " distributions for ", response->draft_token_ids_size(),
                                            " drafts"));
  }
  const int64_t kept = std::min<int64_t>(response->draft_token_ids_size(), max_tokens);
  engine::Drafts drafts{.tokens = std::vector<int64_t>(response->draft_token_ids().begin(),
                                                       response->draft_token_ids().begin() + kept),
                        .distributions = {},
                        .forward = {.rows = response->forward_rows(),
                                    .drafts = response->forward_drafts(),
                                    .queued_ms = rpc::ToMilliseconds(response->queue_time())}};
  for (int64_t i = 0; i < kept && i < response->distributions_size(); ++i) {
    drafts.distributions.push_back(rpc::FromProto(response->distributions(static_cast<int>(i))));
  }
  return drafts;
}

engine::RequestPorts OpenRemotePorts(verifier::VerifierApi& verifier, drafter::DrafterApi* drafter,
                                     v1::PrefillRequest prefill,
                                     const std::optional<engine::DraftOptions>& draft) {
  auto target = std::make_unique<RemoteTargetPort>(verifier, std::move(prefill));
  engine::RequestPorts ports;
  if (draft.has_value()) ports.draft = std::make_unique<RemoteDraftPort>(*drafter, *target, *draft);
  ports.target = std::move(target);
  return ports;
}

}  // namespace specd::orchestrator
