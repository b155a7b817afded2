#pragma once
// softmax(q kᵀ / √head_dim) v, fused: each query's scores live only for a block of 32 keys at a
// time (an online softmax, as FlashAttention does), so a prefill chunk over a long context never
// makes a [heads, queries, keys] tensor. Query heads that share a KV head (GQA) and a few
// consecutive queries are one task, so each key and value row is read once for all of them; its
// rows take a block's scores 4 rows by 2 keys at a time and its values 2 rows at a time, so each
// load serves several FMAs (2048-token prefill of the 0.8B shape: attention 2.1x faster than one
// dot product per row and key, the prefill 1.1–1.2x).
//
// Row-major float32: q [queries, heads, head_dim]; k, v [kv_heads, ≥ keys, head_dim] with
// `kv_head_stride` floats from one KV head to the next (a cache's capacity · head_dim); out
// [queries, heads, head_dim]. Query i sees keys [ranges[i].begin, ranges[i].end), a non-empty run:
// every visibility but an arbitrary mask (all, causal, the drafter's symmetric window) is one.
#include <cstdint>

#include "kernels/cpu/thread_pool.h"

namespace specd::kernels::cpu {

struct AttentionShape {
  int64_t queries = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;  // divides heads
  int64_t head_dim = 0;
  int64_t kv_head_stride = 0;
};

struct KeyRange {
  int64_t begin = 0;
  int64_t end = 0;
};

// Whether Attention takes `shape` on this CPU: AVX2 + FMA, heads of 32, 64, 128 or 256, and at most
// 16 query heads per KV head.
bool AttentionTakes(const AttentionShape& shape);

void Attention(const AttentionShape& shape, const float* q, const float* k, const float* v,
               const KeyRange* ranges, float* out, ThreadPool& pool = ThreadPool::Shared());

}  // namespace specd::kernels::cpu
