#pragma once
// A drafter that proposes exactly what the target would generate greedily, by running the target
// itself on a second cache. Under greedy verification every proposal is accepted, so it shows the
// engine's ceiling (τ = block size) and its overhead apart from any drafter's quality; tests and
// `specd bench spec` use it.
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/qwen35_cache.h"
#include "common/model/qwen35_model.h"
#include "common/engine/block_drafter.h"

namespace specd::engine {

class OracleDrafter final : public BlockDrafter {
 public:
  // `target` must outlive the drafter.
  OracleDrafter(const model::Qwen35Model& target, int64_t block_size);

  int64_t block_size() const override { return block_size_; }
  std::vector<int64_t> TargetHiddenStates() const override { return {}; }
  absl::Status Start(const CommittedContext& prompt, int64_t max_length) override;
  absl::StatusOr<std::vector<int64_t>> Propose(int64_t anchor, int64_t max_tokens) override;
  absl::Status Commit(const CommittedContext& context) override;

 private:
  // Brings the cache to exactly the committed ids: feeds what it lacks, or starts over where its
  // own proposals were not all accepted (a Qwen35Cache cannot shed decoded tokens).
  absl::Status Sync();

  const model::Qwen35Model& target_;
  int64_t block_size_;
  std::optional<model::Qwen35Cache> cache_;
  std::vector<int64_t> committed_;
  std::vector<int64_t> fed_;  // what the cache holds
};

}  // namespace specd::engine
