#include "common/engine/in_process_ports.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace specd::engine {

InProcessTargetPort::InProcessTargetPort(TargetSession session) : session_(std::move(session)) {}

absl::StatusOr<EmittedTokens> InProcessTargetPort::Prefill() { return Keep(session_.Prefill()); }

absl::StatusOr<EmittedTokens> InProcessTargetPort::Verify(std::span<const int64_t> drafts) {
  return Keep(session_.Verify(drafts));
}

absl::StatusOr<EmittedTokens> InProcessTargetPort::Keep(absl::StatusOr<TargetStep> step) {
  if (!step.ok()) return step.status();
  pending_.push_back(std::move(step->context));
  return std::move(step->tokens);
}

std::vector<CommittedContext> InProcessTargetPort::TakeContext() { return std::move(pending_); }

InProcessDraftPort::InProcessDraftPort(InProcessTargetPort& target,
                                       std::unique_ptr<DraftSession> session,
                                       const DraftOptions& options)
    : target_(target), session_(std::move(session)), options_(options) {}

absl::StatusOr<std::vector<int64_t>> InProcessDraftPort::Propose(int64_t anchor,
                                                                 int64_t max_tokens) {
  try {
    for (const CommittedContext& context : target_.TakeContext()) {
      if (absl::Status appended = session_->Append(context); !appended.ok()) return appended;
    }
    absl::StatusOr<DraftProposal> proposal =
        session_->Propose(anchor, std::min(options_.block_size - 1, max_tokens), options_,
                          /*report_confidence=*/false);
    if (!proposal.ok()) return proposal.status();
    return std::move(proposal->tokens);
  } catch (const c10::Error& error) {
    return absl::InternalError(absl::StrCat("draft failed: ", error.what_without_backtrace()));
  }
}

}  // namespace specd::engine
