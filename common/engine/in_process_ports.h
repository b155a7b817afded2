#pragma once
// Ports over the engine's sessions in this process. An InProcessPair is a target and optionally a
// drafter that concurrent requests share; it opens each request's ports, and the draft port takes
// in the context its target port committed as the tensors the target computed (no copy, no shared
// memory). Each model's forwards go through its step scheduler (TargetBatcher, DraftBatcher), so
// concurrent requests share every forward.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/cache_pool.h"
#include "common/engine/draft_batcher.h"
#include "common/engine/draft_session.h"
#include "common/engine/generation.h"
#include "common/engine/ports.h"
#include "common/engine/target_batcher.h"
#include "common/engine/target_session.h"
#include "common/model/qwen35_model.h"

namespace specd::engine {

class InProcessTargetPort final : public TargetPort {
 public:
  // `batcher` runs every forward and must outlive the port; `memory` (if any) is the request's
  // reservation, given back when the port goes (after the draft port, which refers to it).
  InProcessTargetPort(TargetSession session, TargetBatcher& batcher,
                      std::optional<CachePool::Reservation> memory = std::nullopt);

  absl::StatusOr<EmittedTokens> Prefill() override;
  absl::StatusOr<EmittedTokens> Verify(const Drafts& drafts) override;

  // The context committed since the last call, oldest first, consecutive pieces joined.
  std::vector<CommittedContext> TakeContext();

 private:
  absl::StatusOr<EmittedTokens> Keep(absl::StatusOr<TargetStep> step);

  std::optional<CachePool::Reservation> memory_;  // first: held until everything else is gone
  TargetSession session_;
  TargetBatcher& batcher_;
  TargetBatcher::Membership membership_;
  std::vector<CommittedContext> pending_;
};

class InProcessDraftPort final : public DraftPort {
 public:
  // `target` and `batcher` must outlive the port; `options` are resolved (Drafter::Resolve).
  InProcessDraftPort(InProcessTargetPort& target, std::unique_ptr<DraftSession> session,
                     const DraftOptions& options, DraftBatcher& batcher);

  absl::StatusOr<Drafts> Propose(int64_t anchor, int64_t max_tokens) override;

 private:
  InProcessTargetPort& target_;
  std::unique_ptr<DraftSession> session_;
  DraftOptions options_;
  DraftBatcher& batcher_;
  DraftBatcher::Membership membership_;
};

struct PairOptions {
  // The two batchers take turns with each other, and with whatever else the target's turns have.
  BatchingOptions target_batching = {};
  BatchingOptions draft_batching = {};
  CachePool* cache_pool = nullptr;  // the sessions' memory budget; none: no budget
};

class InProcessPair {
 public:
  // Target-only without a drafter. Both, and the options' cache pool, must outlive the pair.
  InProcessPair(const model::Qwen35Model& target, const Drafter* drafter,
                const PairOptions& options = {});

  // The ports of one request (ValidateRequest'd by the caller), drafted with `draft` (resolved
  // here, so a drafter's own refusals come back) or target-only without. With a pool, waits for
  // the memory of the request's longest sequence first (CachePool::Reserve).
  absl::StatusOr<RequestPorts> Open(
      const GenerationRequest& request, const std::optional<DraftOptions>& draft,
      const std::function<bool()>& cancelled = [] { return false; });

  // What the steps so far batched, per model (the drafter's empty without one).
  BatchingStats target_stats() const { return target_batcher_.stats(); }
  BatchingStats drafter_stats() const;

 private:
  const model::Qwen35Model& target_;
  const Drafter* drafter_;
  CachePool* cache_pool_;
  std::shared_ptr<DeviceTurns> turns_;  // the target's (or new): both models' forwards take them
  TargetBatcher target_batcher_;
  std::optional<DraftBatcher> draft_batcher_;
};

}  // namespace specd::engine
