#pragma once
// Ports over the engine's sessions in this process: the draft port takes in the context its
// target port committed as the tensors the target computed (no copy, no shared memory).
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/draft_session.h"
#include "common/engine/ports.h"
#include "common/engine/target_session.h"

namespace specd::engine {

class InProcessTargetPort final : public TargetPort {
 public:
  explicit InProcessTargetPort(TargetSession session);

  absl::StatusOr<EmittedTokens> Prefill() override;
  absl::StatusOr<EmittedTokens> Verify(std::span<const int64_t> drafts) override;

  // The context committed since the last call, oldest first.
  std::vector<CommittedContext> TakeContext();

 private:
  absl::StatusOr<EmittedTokens> Keep(absl::StatusOr<TargetStep> step);

  TargetSession session_;
  std::vector<CommittedContext> pending_;
};

class InProcessDraftPort final : public DraftPort {
 public:
  // `target` must outlive the port; `options` are resolved (Drafter::Resolve).
  InProcessDraftPort(InProcessTargetPort& target, std::unique_ptr<DraftSession> session,
                     const DraftOptions& options);

  absl::StatusOr<std::vector<int64_t>> Propose(int64_t anchor, int64_t max_tokens) override;

 private:
  InProcessTargetPort& target_;
  std::unique_ptr<DraftSession> session_;
  DraftOptions options_;
};

}  // namespace specd::engine
