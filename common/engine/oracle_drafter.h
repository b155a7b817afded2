#pragma once
// A drafter that proposes exactly what the target would generate greedily, by running the target
// itself on a second cache. Under greedy verification every proposal is accepted, so it shows the
// engine's ceiling (τ = block size) and its overhead apart from any drafter's quality; tests and
// `specd bench spec` use it. Under rejection sampling it draws each draft from the target's own
// distribution (over its most likely tokens), the ceiling there. It runs the target itself, so it
// drafts in process only (generate, bench), never as a service.
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/draft_session.h"
#include "common/model/qwen35_model.h"

namespace specd::engine {

class OracleDrafter final : public Drafter {
 public:
  // `target` must outlive the drafter and its sessions.
  OracleDrafter(const model::Qwen35Model& target, int64_t block_size);

  int64_t block_size() const override { return block_size_; }
  std::vector<int64_t> TargetHiddenStates() const override { return {}; }
  bool ReadsTokenIds() const override { return true; }
  // Any block up to block_size(); no window, no adaptive length.
  absl::StatusOr<DraftOptions> Resolve(const DraftOptions& options) const override;
  absl::StatusOr<std::unique_ptr<DraftSession>> OpenSession(int64_t max_length) const override;
  model::CacheFootprint SessionFootprint() const override;

 private:
  const model::Qwen35Model& target_;
  int64_t block_size_;
};

}  // namespace specd::engine
