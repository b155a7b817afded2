#pragma once
// The DFlash drafter service (protos/specd/v1/drafter.proto): the drafter with the target's
// embedding and head, and a table of the engine's draft sessions, one per request, each with a
// mapping of the verifier's context buffer. Each Draft takes in the context rows its session has
// not seen yet and proposes one block in one non-causal forward (engine::DFlashBlockDrafter).
#include <prometheus/gauge.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "common/engine/cache_pool.h"
#include "common/engine/dflash_block_drafter.h"
#include "common/engine/draft_batcher.h"
#include "common/engine/step_batcher.h"
#include "common/io/qwen35_config.h"
#include "common/model/dflash_drafter.h"
#include "common/model/token_head.h"
#include "common/rpc/session_table.h"
#include "services/drafter/drafter_api.h"

namespace specd::drafter {

struct DrafterOptions {
  std::string model_name;      // reported by Info (e.g. the checkpoint directory)
  std::string quantization;    // "w4a16" or "dense"
  int64_t default_window = 0;  // a Draft without a window gets this one; 0: the trained one
  int64_t max_sessions = 64;
  absl::Duration session_idle_timeout = absl::Seconds(60);
  prometheus::Gauge* open_sessions = nullptr;  // optional: follows the number of open sessions
  engine::BatchingOptions batching = {};
  // The memory budget sessions' caches reserve from; none: no budget. A session that does not
  // fit now is refused (RESOURCE_EXHAUSTED), its request going on target-only. It must outlive
  // the handler.
  engine::CachePool* cache_pool = nullptr;
};

class DrafterHandler final : public DrafterApi {
 public:
  // Fails unless `drafter` fits the target of `target_config`.
  static absl::StatusOr<std::unique_ptr<DrafterHandler>> Create(model::DFlashDrafter drafter,
                                                                model::TokenHead head,
                                                                io::Qwen35TextConfig target_config,
                                                                DrafterOptions options);
  ~DrafterHandler() override;

  absl::StatusOr<v1::DraftResponse> Draft(const v1::DraftRequest& request) override;
  absl::StatusOr<v1::DrafterServiceReleaseResponse> Release(
      const v1::DrafterServiceReleaseRequest& request) override;
  absl::StatusOr<v1::DrafterServiceInfoResponse> Info() override;

  size_t open_sessions() const { return sessions_.size(); }
  engine::BatchingStats batching_stats() const { return batcher_.stats(); }
  // The drafter its sessions run, for an in-process pair that drafts with it directly.
  const engine::DFlashBlockDrafter& drafter() const { return *drafter_; }

 private:
  struct Session;

  DrafterHandler(std::unique_ptr<engine::DFlashBlockDrafter> drafter,
                 io::Qwen35TextConfig target_config, DrafterOptions options);

  // The session, opened (`opened` set) on its first Draft.
  absl::StatusOr<std::shared_ptr<Session>> FindOrOpen(const std::string& session_id, bool& opened);
  // Brings the session's cache up to the handle's token_range.end and drafts the block.
  absl::StatusOr<v1::DraftResponse> RunDraft(Session& session, const v1::DraftRequest& request,
                                             const engine::DraftOptions& options);

  const std::unique_ptr<const engine::DFlashBlockDrafter> drafter_;
  const io::Qwen35TextConfig target_config_;
  const DrafterOptions options_;
  const std::string instance_id_;
  engine::DraftBatcher batcher_;         // every session's Draft shares one forward
  rpc::SessionTable<Session> sessions_;  // after the batcher: sessions are members of it
};

}  // namespace specd::drafter
