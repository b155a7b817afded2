#pragma once
// Keys and values of one gated-attention layer for one sequence, preallocated for the longest
// sequence the cache serves. The cache holds no length of its own: the model's cache does, for
// all layers at once, so rolling back attention is just a shorter length.
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "common/model/cache_footprint.h"
#include "common/model/model_options.h"

namespace specd::model {

class KvCache {
 public:
  KvCache(int64_t kv_heads, int64_t head_dim, int64_t max_length, const ModelOptions& options);

  // What such a cache takes per token of max_length.
  static CacheFootprint Footprint(int64_t kv_heads, int64_t head_dim, const ModelOptions& options);
  // What this one holds.
  int64_t bytes() const;

  int64_t max_length() const { return keys_.size(1); }

  // Stores k, v [T, kv_heads, head_dim] at positions [start, start + T).
  void Write(int64_t start, const at::Tensor& k, const at::Tensor& v);
  // The same at the positions a tensor on the cache's device holds ([T] int64): what a CUDA graph
  // replays at later positions.
  void Write(const at::Tensor& positions, const at::Tensor& k, const at::Tensor& v);

  // Views of positions [0, length): [kv_heads, length, head_dim].
  at::Tensor Keys(int64_t length) const { return keys_.narrow(1, 0, length); }
  at::Tensor Values(int64_t length) const { return values_.narrow(1, 0, length); }

 private:
  at::Tensor keys_;  // [kv_heads, max_length, head_dim]
  at::Tensor values_;
};

}  // namespace specd::model
