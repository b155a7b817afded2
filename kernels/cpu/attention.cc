#include "kernels/cpu/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#define SPECD_AVX2 __attribute__((target("avx2,fma")))

namespace specd::kernels::cpu {
namespace {

constexpr int64_t kKeyBlock = 32;  // keys whose scores are live at once
constexpr int64_t kQueryTile = 4;  // consecutive queries per task
constexpr int64_t kMaxGroup = 16;  // query heads per KV head that one task takes
constexpr float kHidden = -std::numeric_limits<float>::infinity();

// e^x for x ≤ 0 (scores less their running maximum), to a few ulp: 2^n · e^r with n = round(x /
// ln 2) and |r| ≤ ln 2 / 2, e^r by Cephes' expf polynomial.
SPECD_AVX2 __m256 ExpNonPositive(__m256 x) {
  // Below −87, e^x is (nearly) 0 in float32 and 2^n would leave the normal range.
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);  // ln 2 in two parts
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n, built in the exponent bits.
  const __m256i exponent =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(exponent));
}

SPECD_AVX2 float Sum(__m256 x) {
  const __m128 halves = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  const __m128 pairs = _mm_add_ps(halves, _mm_movehl_ps(halves, halves));
  return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
}

// Lane i: the sum of x[i]'s lanes.
SPECD_AVX2 __m256 LaneSums(const __m256 (&x)[8]) {
  const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(x[0], x[1]), _mm256_hadd_ps(x[2], x[3]));
  const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(x[4], x[5]), _mm256_hadd_ps(x[6], x[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// One task: the `group` query heads of KV head `kv_head` for queries [q0, q0 + tile), its rows
// (row = query · group + head in group) taking each block of keys together: scores as 4 rows by 2
// keys at a time (each key and query load serves several products, eight sums in flight), then
// the weighted values as 2 rows by 64 dims (each value load serves both rows).
template <int64_t kDim>
struct Task {
  static constexpr int64_t kMaxRows = kQueryTile * kMaxGroup;
  // Of a value row, per pass over the block's keys.
  static constexpr int64_t kDimsAtOnce = std::min<int64_t>(64, kDim);

  const AttentionShape& shape;
  const float* q;
  const float* k;
  const float* v;
  const KeyRange* ranges;
  float* out;

  // scores[row][j] = scale · q_row · key (block + j), for j < count.
  SPECD_AVX2 void Scores(const float* const* queries, int64_t rows, const float* keys,
                         int64_t block, int64_t count, float scale,
                         float (&scores)[kMaxRows][kKeyBlock]) const {
    const __m256 scaled = _mm256_set1_ps(scale);
    for (int64_t r0 = 0; r0 < rows; r0 += 4) {
      const float* query[4];
      for (int i = 0; i < 4; ++i) query[i] = queries[std::min(r0 + i, rows - 1)];
      for (int64_t j0 = 0; j0 < count; j0 += 2) {
        const float* key[2];
        for (int t = 0; t < 2; ++t) key[t] = keys + (block + std::min(j0 + t, count - 1)) * kDim;
        __m256 sum[8];
        for (__m256& s : sum) s = _mm256_setzero_ps();
        for (int64_t d = 0; d < kDim; d += 8) {
          const __m256 k0 = _mm256_loadu_ps(key[0] + d), k1 = _mm256_loadu_ps(key[1] + d);
          for (int i = 0; i < 4; ++i) {
            const __m256 x = _mm256_loadu_ps(query[i] + d);
            sum[2 * i] = _mm256_fmadd_ps(x, k0, sum[2 * i]);
            sum[2 * i + 1] = _mm256_fmadd_ps(x, k1, sum[2 * i + 1]);
          }
        }
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, _mm256_mul_ps(LaneSums(sum), scaled));
        for (int64_t i = 0; i < 4 && r0 + i < rows; ++i) {
          for (int64_t t = 0; t < 2 && j0 + t < count; ++t)
            scores[r0 + i][j0 + t] = lanes[2 * i + t];
        }
      }
    }
  }

  // acc[r0 + i] = acc[r0 + i] · shrink[r0 + i] + Σ_j p[r0 + i][j] · value (block + j), i < kRows.
  template <int kRows>
  SPECD_AVX2 void AddValues(int64_t r0, const float* values, int64_t block, int64_t count,
                            const float (&p)[kMaxRows][kKeyBlock], const float* shrink,
                            float (&acc)[kMaxRows][kDim]) const {
    for (int64_t d0 = 0; d0 < kDim; d0 += kDimsAtOnce) {
      __m256 a[kRows][kDimsAtOnce / 8];
      for (int i = 0; i < kRows; ++i) {
        const __m256 factor = _mm256_set1_ps(shrink[r0 + i]);
        for (int c = 0; c < kDimsAtOnce / 8; ++c) {
          a[i][c] = _mm256_mul_ps(_mm256_load_ps(acc[r0 + i] + d0 + 8 * c), factor);
        }
      }
      for (int64_t j = 0; j < count; ++j) {
        const float* value = values + (block + j) * kDim + d0;
        __m256 weight[kRows];
        for (int i = 0; i < kRows; ++i) weight[i] = _mm256_set1_ps(p[r0 + i][j]);
        for (int c = 0; c < kDimsAtOnce / 8; ++c) {
          const __m256 x = _mm256_loadu_ps(value + 8 * c);
          for (int i = 0; i < kRows; ++i) a[i][c] = _mm256_fmadd_ps(weight[i], x, a[i][c]);
        }
      }
      for (int i = 0; i < kRows; ++i) {
        for (int c = 0; c < kDimsAtOnce / 8; ++c)
          _mm256_store_ps(acc[r0 + i] + d0 + 8 * c, a[i][c]);
      }
    }
  }

  SPECD_AVX2 void Run(int64_t kv_head, int64_t q0, int64_t tile) const {
    const int64_t group = shape.heads / shape.kv_heads;
    const int64_t rows = tile * group;
    const float scale = 1.0f / std::sqrt(static_cast<float>(kDim));
    const float* keys = k + kv_head * shape.kv_head_stride;
    const float* values = v + kv_head * shape.kv_head_stride;
    const auto query_row = [&](int64_t row) {
      return (q0 + row / group) * shape.heads + kv_head * group + row % group;
    };

    alignas(64) float acc[kMaxRows][kDim];
    alignas(64) float p[kMaxRows][kKeyBlock];
    float running_max[kMaxRows], total[kMaxRows], shrink[kMaxRows];
    const float* queries[kMaxRows];
    int64_t first = ranges[q0].begin, last = ranges[q0].end;
    for (int64_t i = 1; i < tile; ++i) {
      first = std::min(first, ranges[q0 + i].begin);
      last = std::max(last, ranges[q0 + i].end);
    }
    for (int64_t row = 0; row < rows; ++row) {
      std::fill(acc[row], acc[row] + kDim, 0.0f);
      running_max[row] = kHidden;
      total[row] = 0;
      queries[row] = q + query_row(row) * kDim;
    }

    for (int64_t block = first; block < last; block += kKeyBlock) {
      const int64_t count = std::min(kKeyBlock, last - block);
      Scores(queries, rows, keys, block, count, scale, p);
      for (int64_t row = 0; row < rows; ++row) {
        const KeyRange& seen = ranges[q0 + row / group];
        const int64_t begin = std::max(block, seen.begin), end = std::min(block + count, seen.end);
        float* scores = p[row];
        if (begin >= end) {
          // Sees none of this block: its sums stay as they are.
          std::fill(scores, scores + kKeyBlock, 0.0f);
          shrink[row] = 1;
          continue;
        }
        float block_max = kHidden;
        for (int64_t j = 0; j < kKeyBlock; ++j) {
          const int64_t key = block + j;
          if (key < begin || key >= end) scores[j] = kHidden;
          block_max = std::max(block_max, scores[j]);
        }
        // Rescale what the earlier blocks summed to the new maximum.
        const float new_max = std::max(running_max[row], block_max);
        shrink[row] = std::exp(running_max[row] - new_max);
        running_max[row] = new_max;
        const __m256 max = _mm256_set1_ps(new_max);
        __m256 block_total = _mm256_setzero_ps();
        for (int64_t j = 0; j < kKeyBlock; j += 8) {
          const __m256 s = _mm256_loadu_ps(scores + j);
          const __m256 seen_keys = _mm256_cmp_ps(s, _mm256_set1_ps(kHidden), _CMP_NEQ_OQ);
          const __m256 e = _mm256_and_ps(seen_keys, ExpNonPositive(_mm256_sub_ps(s, max)));
          _mm256_storeu_ps(scores + j, e);
          block_total = _mm256_add_ps(block_total, e);
        }
        total[row] = total[row] * shrink[row] + Sum(block_total);
      }
      int64_t row = 0;
      for (; row + 2 <= rows; row += 2) AddValues<2>(row, values, block, count, p, shrink, acc);
      if (row < rows) AddValues<1>(row, values, block, count, p, shrink, acc);
    }
    for (int64_t row = 0; row < rows; ++row) {
      const __m256 inverse = _mm256_set1_ps(1.0f / total[row]);
      float* o = out + query_row(row) * kDim;
      for (int64_t d = 0; d < kDim; d += 8) {
        _mm256_storeu_ps(o + d, _mm256_mul_ps(_mm256_load_ps(acc[row] + d), inverse));
      }
    }
  }
};

template <int64_t kDim>
void Run(const AttentionShape& shape, const float* q, const float* k, const float* v,
         const KeyRange* ranges, float* out, ThreadPool& pool) {
  const Task<kDim> task{shape, q, k, v, ranges, out};
  const int64_t tiles = (shape.queries + kQueryTile - 1) / kQueryTile;
  pool.ParallelFor(shape.kv_heads * tiles, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t q0 = t % tiles * kQueryTile;
      task.Run(t / tiles, q0, std::min(kQueryTile, shape.queries - q0));
    }
  });
}

}  // namespace

bool AttentionTakes(const AttentionShape& shape) {
  const int64_t dim = shape.head_dim;
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         (dim == 32 || dim == 64 || dim == 128 || dim == 256) && shape.kv_heads > 0 &&
         shape.heads % shape.kv_heads == 0 && shape.heads / shape.kv_heads <= kMaxGroup;
}

void Attention(const AttentionShape& shape, const float* q, const float* k, const float* v,
               const KeyRange* ranges, float* out, ThreadPool& pool) {
  switch (shape.head_dim) {
    case 32:
      return Run<32>(shape, q, k, v, ranges, out, pool);
    case 64:
      return Run<64>(shape, q, k, v, ranges, out, pool);
    case 128:
      return Run<128>(shape, q, k, v, ranges, out, pool);
    default:
      return Run<256>(shape, q, k, v, ranges, out, pool);
  }
}

}  // namespace specd::kernels::cpu
