#pragma once
// The drafter service (protos/specd/v1/drafter.proto): a drafter (served_drafter.h) and a table
// of the engine's draft sessions, one per request, each with a mapping of the verifier's context
// buffer when the drafter reads hidden states. Each Draft takes in the committed positions its
// session has not seen yet (rows of the buffer, ids of the request) and proposes one block; the
// Drafts of concurrent sessions share the drafter's forwards (engine::DraftBatcher).
#include <prometheus/gauge.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "common/engine/cache_pool.h"
#include "common/engine/draft_batcher.h"
#include "common/engine/draft_session.h"
#include "common/engine/step_batcher.h"
#include "common/io/qwen35_config.h"
#include "common/rpc/session_table.h"
#include "services/drafter/drafter_api.h"
#include "services/drafter/served_drafter.h"

namespace specd::drafter {

struct DrafterOptions {
  std::string model_name;      // reported by Info (the name it was opened by)
  std::string quantization;    // "w4a16", "dense", or empty without a DFlash drafter
  int64_t default_window = 0;  // a Draft without a window gets this one; 0: the trained one
  int64_t max_sessions = 64;
  absl::Duration session_idle_timeout = absl::Seconds(60);
  prometheus::Gauge* open_sessions = nullptr;  // optional: follows the number of open sessions
  engine::BatchingOptions batching = {};
  // The memory budget sessions' caches reserve from; none: no budget. A session that does not
  // fit now is refused (RESOURCE_EXHAUSTED), its request going on target-only. It must outlive
  // the handler.
  engine::CachePool* cache_pool = nullptr;
  // Whether the drafter's embedding and head are a verifier's, mapped (Info reports it).
  bool uses_shared_weights = false;
};

class DrafterHandler final : public DrafterApi {
 public:
  // Serves `drafter`, opened for the target of `target_config`.
  static absl::StatusOr<std::unique_ptr<DrafterHandler>> Create(ServedDrafter drafter,
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
  const engine::Drafter& drafter() const { return *drafter_.drafter; }

 private:
  struct Session;

  DrafterHandler(ServedDrafter drafter, io::Qwen35TextConfig target_config, DrafterOptions options);

  // The session, opened (`opened` set) on its first Draft.
  absl::StatusOr<std::shared_ptr<Session>> FindOrOpen(const std::string& session_id, bool& opened);
  // Brings the session up to the committed positions' end and drafts the block.
  absl::StatusOr<v1::DraftResponse> RunDraft(Session& session, const v1::DraftRequest& request,
                                             const engine::DraftOptions& options);
  // The committed positions of `request` the session takes in, from `from` on (lowered to where
  // the request's ids begin, for a drafter that reads them), to `end`.
  absl::StatusOr<engine::CommittedContext> ContextOf(const Session& session,
                                                     const v1::DraftRequest& request, int64_t from,
                                                     int64_t end) const;

  const ServedDrafter drafter_;
  const bool reads_rows_;  // the drafter taps target layers: sessions map the context buffer
  const io::Qwen35TextConfig target_config_;
  const DrafterOptions options_;
  const std::string instance_id_;
  engine::DraftBatcher batcher_;         // every session's Draft shares one forward
  rpc::SessionTable<Session> sessions_;  // after the batcher: sessions are members of it
};

}  // namespace specd::drafter
