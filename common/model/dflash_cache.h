#pragma once
// A DFlash drafter's memory of one sequence: per drafter layer, the keys and values its context
// features project to (KV injection), for positions [0, length). Preallocated for `max_length`
// positions and reused across requests (Reset). Draft blocks never enter it, so dropping context
// the target rejected is just a shorter length (Truncate).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/model/kv_cache.h"

namespace specd::model {

class DFlashCache {
 public:
  DFlashCache(std::vector<KvCache> layers, int64_t max_length);

  uint64_t id() const { return id_; }  // cache_id.h
  int64_t length() const { return length_; }
  int64_t max_length() const { return max_length_; }

  // Keeps the context of positions [0, length) and forgets the rest.
  absl::Status Truncate(int64_t length);

  // Empty again, ready for a new request; nothing is reallocated.
  void Reset() { length_ = 0; }

  // The memory its layers hold (DFlashDrafter::SequenceFootprint says it beforehand).
  int64_t bytes() const;

 private:
  friend class DFlashDrafter;

  size_t num_layers() const { return layers_.size(); }
  KvCache& layer(size_t index) { return layers_[index]; }
  const KvCache& layer(size_t index) const { return layers_[index]; }
  // Records that every layer now holds `count` more positions.
  void Append(int64_t count) { length_ += count; }

  std::vector<KvCache> layers_;
  uint64_t id_ = 0;
  int64_t max_length_ = 0;
  int64_t length_ = 0;
};

}  // namespace specd::model
