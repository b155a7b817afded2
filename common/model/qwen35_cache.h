#pragma once
// Everything one sequence has fed the model: a KvCache per attention layer, a GatedDeltaNetState
// per DeltaNet layer, and the length they all share. Preallocated for `max_length` tokens and
// reused across requests (Reset). After a verify block, Rollback keeps any prefix of it.
#include <cstdint>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "common/model/gated_delta_net_state.h"
#include "common/model/kv_cache.h"

namespace specd::model {

// The cache of one decoder layer, of the kind its mixer needs.
using LayerCache = std::variant<GatedDeltaNetState, KvCache>;

class Qwen35Cache {
 public:
  Qwen35Cache(std::vector<LayerCache> layers, int64_t max_length);

  uint64_t id() const { return id_; }  // cache_id.h
  int64_t length() const { return length_; }
  int64_t max_length() const { return max_length_; }

  // Tokens of the last forward block that Rollback can still give back; 0 once anything else ran.
  int64_t pending_block_length() const { return pending_block_length_; }

  // Keeps the first `accepted` tokens of the pending block and forgets the rest, exactly as if
  // only those had been fed: attention just gets shorter, DeltaNet states keep the accepted
  // tokens' inputs, which the next forward replays before its own.
  absl::Status Rollback(int64_t accepted);

  // Tokens of an earlier block (all of it, or what Rollback kept) that the DeltaNet layers take in
  // again at the start of the next forward, before its own; 0 in a model without them. Such a
  // forward costs more than its own rows say.
  int64_t replay_length() const;

  // Empty again, ready for a new request; nothing is reallocated.
  void Reset();

  // The memory its layers hold (Qwen35Model::SequenceFootprint says it beforehand).
  int64_t bytes() const;

 private:
  friend class Qwen35Model;

  LayerCache& layer(size_t index) { return layers_[index]; }
  template <typename Visit>
  void ForEachDeltaNetState(const Visit& visit) {
    for (LayerCache& layer : layers_) {
      if (auto* state = std::get_if<GatedDeltaNetState>(&layer)) visit(*state);
    }
  }
  // Records that `count` more tokens went through every layer.
  void Append(int64_t count, bool keep_for_rollback);

  std::vector<LayerCache> layers_;
  uint64_t id_ = 0;
  int64_t max_length_ = 0;
  int64_t length_ = 0;
  int64_t pending_block_length_ = 0;
};

}  // namespace specd::model
