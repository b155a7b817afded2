#include "common/model/kv_cache.h"

#include <ATen/ATen.h>

namespace specd::model {

KvCache::KvCache(int64_t kv_heads, int64_t head_dim, int64_t max_length,
                 const ModelOptions& options) {
  const auto tensor_options = at::TensorOptions().dtype(options.dtype).device(options.device);
  keys_ = at::zeros({kv_heads, max_length, head_dim}, tensor_options);
  values_ = at::zeros({kv_heads, max_length, head_dim}, tensor_options);
}

CacheFootprint KvCache::Footprint(int64_t kv_heads, int64_t head_dim, const ModelOptions& options) {
  const auto element = static_cast<int64_t>(c10::elementSize(options.dtype));
  return {.fixed_bytes = 0, .bytes_per_token = 2 * kv_heads * head_dim * element};
}

int64_t KvCache::bytes() const { return static_cast<int64_t>(keys_.nbytes() + values_.nbytes()); }

void KvCache::Write(int64_t start, const at::Tensor& k, const at::Tensor& v) {
  keys_.narrow(1, start, k.size(0)).copy_(k.transpose(0, 1));
  values_.narrow(1, start, v.size(0)).copy_(v.transpose(0, 1));
}

void KvCache::Write(const at::Tensor& positions, const at::Tensor& k, const at::Tensor& v) {
  keys_.index_copy_(1, positions, k.transpose(0, 1));
  values_.index_copy_(1, positions, v.transpose(0, 1));
}

}  // namespace specd::model
