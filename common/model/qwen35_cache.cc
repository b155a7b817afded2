#include "common/model/qwen35_cache.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model/cache_id.h"

namespace specd::model {

Qwen35Cache::Qwen35Cache(std::vector<LayerCache> layers, int64_t max_length)
    : layers_(std::move(layers)), id_(NewCacheId()), max_length_(max_length) {}

absl::Status Qwen35Cache::Rollback(int64_t accepted) {
  if (accepted < 0 || accepted > pending_block_length_) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot keep ", accepted, " tokens of the last block: ", pending_block_length_,
                     " can be rolled back"));
  }
  ForEachDeltaNetState([&](GatedDeltaNetState& state) { state.RollbackBlock(accepted); });
  length_ -= pending_block_length_ - accepted;
  pending_block_length_ = 0;
  return absl::OkStatus();
}

int64_t Qwen35Cache::replay_length() const {
  // Every DeltaNet layer took the same tokens in: the first one's answer is all of theirs.
  for (const LayerCache& layer : layers_) {
    if (const auto* state = std::get_if<GatedDeltaNetState>(&layer)) return state->replay_length();
  }
  return 0;
}

int64_t Qwen35Cache::bytes() const {
  int64_t total = 0;
  for (const LayerCache& layer : layers_) {
    total += std::visit([](const auto& cache) { return cache.bytes(); }, layer);
  }
  return total;
}

void Qwen35Cache::Reset() {
  ForEachDeltaNetState([](GatedDeltaNetState& state) { state.Reset(); });
  length_ = 0;
  pending_block_length_ = 0;
}

void Qwen35Cache::Append(int64_t count, bool keep_for_rollback) {
  length_ += count;
  pending_block_length_ = keep_for_rollback ? count : 0;
}

}  // namespace specd::model
