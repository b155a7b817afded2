#pragma once
// The target verifier (protos/specd/v1/verifier.proto): the target model and a table of the
// engine's target sessions, one per request, each with the context buffer the drafter maps.
// Prefill and Verify are engine::TargetSession's, run by an engine::TargetBatcher so that every
// session's step shares one forward; this adds the contract's checks and mapping, and writes each
// step's committed rows into the buffer.
#include <prometheus/gauge.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/engine/cache_pool.h"
#include "common/engine/step_batcher.h"
#include "common/engine/target_batcher.h"
#include "common/engine/target_session.h"
#include "common/model/qwen35_model.h"
#include "common/rpc/session_table.h"
#include "services/verifier/verifier_api.h"

namespace specd::verifier {

struct VerifierOptions {
  std::string model_name;    // reported by Info (e.g. the checkpoint directory)
  std::string quantization;  // "w4a16" or "dense"
  // Layers tapped for a session whose Prefill names none; empty: none.
  std::vector<int64_t> tapped_layer_ids = {};
  int64_t max_sessions = 64;
  int64_t max_session_length = 4096;  // capped by the model's max_position_embeddings
  int64_t max_block_size = 16;
  absl::Duration session_idle_timeout = absl::Seconds(60);
  prometheus::Gauge* open_sessions = nullptr;  // optional: follows the number of open sessions
  engine::BatchingOptions batching = {};
  // The memory budget sessions (caches and context buffers) reserve from; none: no budget. It
  // must outlive the handler.
  engine::CachePool* cache_pool = nullptr;
};

class VerifierHandler final : public VerifierApi {
 public:
  // `target` must outlive the handler; options are checked against it.
  static absl::StatusOr<std::unique_ptr<VerifierHandler>> Create(const model::Qwen35Model& target,
                                                                 VerifierOptions options);
  ~VerifierHandler() override;

  absl::StatusOr<v1::PrefillResponse> Prefill(const v1::PrefillRequest& request) override;
  absl::StatusOr<v1::PrefillResponse> PrefillCancellable(
      const v1::PrefillRequest& request, const std::function<bool()>& cancelled) override;
  absl::StatusOr<v1::VerifyResponse> Verify(const v1::VerifyRequest& request) override;
  absl::StatusOr<v1::TargetVerifierServiceReleaseResponse> Release(
      const v1::TargetVerifierServiceReleaseRequest& request) override;
  absl::StatusOr<v1::TargetVerifierServiceInfoResponse> Info() override;

  size_t open_sessions() const { return sessions_.size(); }
  engine::BatchingStats batching_stats() const { return batcher_.stats(); }

 private:
  struct Session;

  VerifierHandler(const model::Qwen35Model& target, VerifierOptions options);

  absl::StatusOr<std::shared_ptr<Session>> NewSession(const v1::PrefillRequest& request,
                                                      const std::function<bool()>& cancelled);
  absl::StatusOr<v1::PrefillResponse> RunPrefill(Session& session);
  absl::StatusOr<v1::VerifyResponse> RunVerify(Session& session, const v1::VerifyRequest& request);
  // Writes the rows a step committed into the session's context buffer and returns its new
  // handle (unset without one); advances the generation.
  absl::StatusOr<v1::TensorHandle> PublishRows(Session& session,
                                               const engine::CommittedContext& context);

  const model::Qwen35Model& target_;
  const VerifierOptions options_;
  const std::string instance_id_;
  std::atomic<uint64_t> next_buffer_id_ = 1;
  // The target's embedding and head for drafter processes on its GPU (Info); empty on the CPU.
  std::map<std::string, v1::TensorHandle> shared_weights_;
  engine::TargetBatcher batcher_;
  rpc::SessionTable<Session> sessions_;  // after the batcher: sessions are members of it
};

}  // namespace specd::verifier
