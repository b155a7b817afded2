#pragma once
// Ports over the engine's sessions in this process. An InProcessPair is a target and optionally a
// drafter that concurrent requests share; it opens each request's ports, and the draft port takes
// in the context its target port committed as the tensors the target computed (no copy, no shared
// memory). Forwards on each model take turns, one at a time like kernels on one device stream,
// while requests interleave step by step.
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/draft_session.h"
#include "common/engine/generation.h"
#include "common/engine/ports.h"
#include "common/engine/target_session.h"
#include "common/model/qwen35_model.h"

namespace specd::engine {

class InProcessTargetPort final : public TargetPort {
 public:
  // `turns` is held around every forward and must outlive the port.
  InProcessTargetPort(TargetSession session, std::mutex& turns);

  absl::StatusOr<EmittedTokens> Prefill() override;
  absl::StatusOr<EmittedTokens> Verify(std::span<const int64_t> drafts) override;

  // The context committed since the last call, oldest first.
  std::vector<CommittedContext> TakeContext();

 private:
  absl::StatusOr<EmittedTokens> Keep(absl::StatusOr<TargetStep> step);

  TargetSession session_;
  std::mutex& turns_;
  std::vector<CommittedContext> pending_;
};

class InProcessDraftPort final : public DraftPort {
 public:
  // `target` and `turns` must outlive the port; `options` are resolved (Drafter::Resolve).
  InProcessDraftPort(InProcessTargetPort& target, std::unique_ptr<DraftSession> session,
                     const DraftOptions& options, std::mutex& turns);

  absl::StatusOr<std::vector<int64_t>> Propose(int64_t anchor, int64_t max_tokens) override;

 private:
  InProcessTargetPort& target_;
  std::unique_ptr<DraftSession> session_;
  DraftOptions options_;
  std::mutex& turns_;
};

class InProcessPair {
 public:
  // Target-only without a drafter. Both must outlive the pair.
  InProcessPair(const model::Qwen35Model& target, const Drafter* drafter);

  // The ports of one request (ValidateRequest'd by the caller), drafted with `draft` (resolved
  // here, so a drafter's own refusals come back) or target-only without.
  absl::StatusOr<RequestPorts> Open(const GenerationRequest& request,
                                    const std::optional<DraftOptions>& draft);

 private:
  const model::Qwen35Model& target_;
  const Drafter* drafter_;
  std::mutex target_turns_;
  std::mutex drafter_turns_;
};

}  // namespace specd::engine
