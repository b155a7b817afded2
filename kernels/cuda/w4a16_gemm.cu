#include <algorithm>
#include <climits>
#include <cstdint>

#include "kernels/cuda/w4a16_gemm.h"

namespace specd::kernels::cuda {
namespace {

// A warp multiplies a tile of 16 weight rows by all (≤ 32) rows of x with mma.m16n8k16: W is the
// 16-row A operand and x the 8-column B operand, one MMA column block per 8 rows of x, so the
// weights are read and dequantized once whatever M is, and M = 1 costs the tensor cores no more
// than M = 8. A block's warps split K between them and sum their tiles in shared memory.
constexpr int kTileRows = 16;
constexpr int kStepCols = 128;  // K columns per warp step: 16 rows × 64 contiguous packed bytes
constexpr int kStepWords = kStepCols / 8;
constexpr int kWarps = 8;
constexpr int kUnroll = 4;  // steps whose loads a warp issues before it computes the first one
constexpr int kMaxRows = 32;

bool ValidShape(const Int4MatrixDevice& w) {
  return w.packed != nullptr && w.scales != nullptr && w.rows >= 0 && w.rows <= INT_MAX &&
         w.cols > 0 && w.cols <= INT_MAX && w.cols % 8 == 0 && w.group_size > 0 &&
         w.group_size % 8 == 0 && w.cols % w.group_size == 0;
}

// Scale and zero-point bias of one weight row in one group, each in both halves of a bf16 pair.
struct GroupParams {
  __nv_bfloat162 scale, bias;
};

__device__ __forceinline__ GroupParams LoadGroup(const Int4MatrixDevice& w, int64_t row, int group,
                                                 int groups) {
  const int64_t i = row * groups + group;
  const int zero_point = w.zero_points != nullptr ? __ldg(w.zero_points + i) : 0;
  // Dequant2 turns nibble u = q + 8 into 128 + u, so subtracting 136 + z leaves q - z.
  return {__bfloat162bfloat162(__ldg(w.scales + i)), __float2bfloat162_rn(136.0f + zero_point)};
}

// Nibbles j and j + 4 of `word` (j = shift / 4) as the bf16 pair ((q - z)·s, …): OR-ing a nibble
// into the mantissa of 128.0 (0x4300, whose ulp is 1) gives 128 + nibble exactly, the subtraction
// is exact, and the product is rounded once, as DequantizeToBf16 rounds it.
__device__ __forceinline__ uint32_t Dequant2(uint32_t word, int shift, GroupParams p) {
  const uint32_t biased = ((word >> shift) & 0x000F000Fu) | 0x43004300u;
  const __nv_bfloat162 w =
      __hmul2(__hsub2(*reinterpret_cast<const __nv_bfloat162*>(&biased), p.bias), p.scale);
  return *reinterpret_cast<const uint32_t*>(&w);
}

// Packed words [first, first + 4) of a row, loaded evict-first (each is read once); words past the
// row read as 0 (their x columns are 0). `vector`: the row holds whole 16-byte-aligned runs of 4
// words.
__device__ __forceinline__ void LoadWords(const int32_t* row, int first, int words, bool vector,
                                          uint32_t (&out)[4]) {
  if (vector) {
    const uint4 v = first < words ? __ldcs(reinterpret_cast<const uint4*>(row + first))
                                  : make_uint4(0, 0, 0, 0);
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
    return;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[i] = first + i < words ? static_cast<uint32_t>(__ldcs(row + first + i)) : 0u;
  }
}

__device__ __forceinline__ void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// kMBlocks: MMA column blocks of 8 x rows. kGroupPerRun: a thread's run of 4 words (32 columns)
// lies in one group (group size a multiple of 32), so it loads one scale per row per step.
template <int kMBlocks, bool kGroupPerRun>
__global__ void __launch_bounds__(kWarps * 32, 2)
    W4A16GemmKernel(const __nv_bfloat16* __restrict__ x, int m, Int4MatrixDevice w,
                    bool vector_loads, __nv_bfloat16* __restrict__ y) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;  // MMA fragment coordinates: row group, thread in group
  const int n_rows = static_cast<int>(w.rows), k_cols = static_cast<int>(w.cols);
  const int words = k_cols / 8, groups = static_cast<int>(w.cols / w.group_size);
  const int words_per_group = static_cast<int>(w.group_size / 8);
  const int n0 = blockIdx.x * kTileRows;
  // This thread's weight rows g and g + 8; rows past N read row N - 1 and are dropped at the end.
  const int64_t rows[2] = {min(n0 + g, n_rows - 1), min(n0 + g + 8, n_rows - 1)};
  const int32_t* packed[2] = {w.packed + rows[0] * words, w.packed + rows[1] * words};

  // Thread t of a step covers words first…first+3 of both rows, 64 contiguous bytes per row and
  // quad. Since a dot product may visit K in any order, its MMA slots hold those columns in
  // whatever order unpacks cheapest, and the x fragments are permuted to the same order.
  float acc[kMBlocks][4] = {};
  const int steps = (words + kStepWords - 1) / kStepWords;
  for (int s0 = warp; s0 < steps; s0 += kWarps * kUnroll) {
    uint32_t q[kUnroll][2][4];
    GroupParams p[kUnroll][2];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int first = (s0 + u * kWarps) * kStepWords + 4 * t;
      const int group = min(first / words_per_group, groups - 1);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        LoadWords(packed[r], first, words, vector_loads, q[u][r]);
        p[u][r] = LoadGroup(w, rows[r], group, groups);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int step = s0 + u * kWarps;
      if (step >= steps) break;
      const int first = step * kStepWords + 4 * t;
#pragma unroll
      for (int i = 0; i < 4; ++i) {  // word first + i: columns 8·(first + i) … +7
        if (!kGroupPerRun && i > 0) {
          const int group = min((first + i) / words_per_group, groups - 1);
          for (int r = 0; r < 2; ++r) p[u][r] = LoadGroup(w, rows[r], group, groups);
        }
        // Two k16 MMAs per word. One AND-OR unpacks nibbles (j, j + 4) into a bf16 pair, so the
        // slot pairs hold columns (0,4), (1,5) for the first MMA and (2,6), (3,7) for the second.
        uint32_t a[2][4];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          a[h][0] = Dequant2(q[u][0][i], 8 * h, p[u][0]);
          a[h][1] = Dequant2(q[u][1][i], 8 * h, p[u][1]);
          a[h][2] = Dequant2(q[u][0][i], 8 * h + 4, p[u][0]);
          a[h][3] = Dequant2(q[u][1][i], 8 * h + 4, p[u][1]);
        }
        const int k = 8 * (first + i);
#pragma unroll
        for (int b = 0; b < kMBlocks; ++b) {
          const int xr = 8 * b + g;  // the x row of this thread's B fragment
          const uint4 v = xr < m && k < k_cols
                              ? __ldg(reinterpret_cast<const uint4*>(x + int64_t{xr} * k_cols + k))
                              : make_uint4(0, 0, 0, 0);
          // v holds columns (0,1) (2,3) (4,5) (6,7); regroup them as (0,4) (1,5) (2,6) (3,7).
          Mma(acc[b], a[0], __byte_perm(v.x, v.z, 0x5410), __byte_perm(v.x, v.z, 0x7632));
          Mma(acc[b], a[1], __byte_perm(v.y, v.w, 0x5410), __byte_perm(v.y, v.w, 0x7632));
        }
      }
    }
  }

  __shared__ float partial[kWarps][kMBlocks * 4 * 32];
#pragma unroll
  for (int b = 0; b < kMBlocks; ++b) {
    for (int r = 0; r < 4; ++r) partial[warp][(b * 4 + r) * 32 + lane] = acc[b][r];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < kMBlocks * 4 * 32; e += kWarps * 32) {
    float sum = 0.0f;
    for (int v = 0; v < kWarps; ++v) sum += partial[v][e];
    // Accumulator r of lane l: weight row l / 4 + 8·(r / 2), x row 2·(l % 4) + r % 2.
    const int l = e % 32, r = e / 32 % 4, b = e / 128;
    const int n = n0 + l / 4 + 8 * (r / 2), xr = 8 * b + 2 * (l % 4) + r % 2;
    if (n < n_rows && xr < m) y[int64_t{xr} * n_rows + n] = __float2bfloat16_rn(sum);
  }
}

using GemmKernel = void (*)(const __nv_bfloat16*, int, Int4MatrixDevice, bool, __nv_bfloat16*);
const GemmKernel kGemmKernels[2][4] = {
    {W4A16GemmKernel<1, false>, W4A16GemmKernel<2, false>, W4A16GemmKernel<3, false>,
     W4A16GemmKernel<4, false>},
    {W4A16GemmKernel<1, true>, W4A16GemmKernel<2, true>, W4A16GemmKernel<3, true>,
     W4A16GemmKernel<4, true>},
};

// One thread per packed word: 8 weights, computed in float32 (exact) and rounded to bf16.
__global__ void DequantizeKernel(Int4MatrixDevice w, __nv_bfloat16* __restrict__ dense) {
  const int64_t words = w.cols / 8, groups = w.cols / w.group_size;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < w.rows * words;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t group = i / words * groups + i % words * 8 / w.group_size;
    const uint32_t word = static_cast<uint32_t>(w.packed[i]);
    const float scale = __bfloat162float(w.scales[group]);
    const int zero_point = w.zero_points != nullptr ? w.zero_points[group] : 0;
    for (int j = 0; j < 8; ++j) {
      const int q = static_cast<int>(word >> (4 * j) & 0xF) - 8;
      dense[8 * i + j] = __float2bfloat16_rn(static_cast<float>(q - zero_point) * scale);
    }
  }
}

}  // namespace

cudaError_t W4A16Gemm(const __nv_bfloat16* x, int64_t rows, const Int4MatrixDevice& w,
                      __nv_bfloat16* y, cudaStream_t stream) {
  if (!ValidShape(w) || rows < 0 || (rows > 0 && (x == nullptr || y == nullptr)) ||
      reinterpret_cast<std::uintptr_t>(x) % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  if (rows == 0 || w.rows == 0) return cudaSuccess;
  // 16-byte loads of packed words need every row to start 16-byte aligned.
  const bool vector_loads =
      w.cols % 32 == 0 && reinterpret_cast<std::uintptr_t>(w.packed) % 16 == 0;
  const bool group_per_run = w.group_size % 32 == 0;
  const unsigned blocks = static_cast<unsigned>((w.rows + kTileRows - 1) / kTileRows);
  for (int64_t r0 = 0; r0 < rows; r0 += kMaxRows) {
    const int m = static_cast<int>(std::min<int64_t>(rows - r0, kMaxRows));
    kGemmKernels[group_per_run][(m + 7) / 8 - 1]<<<blocks, kWarps * 32, 0, stream>>>(
        x + r0 * w.cols, m, w, vector_loads, y + r0 * w.rows);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t DequantizeToBf16(const Int4MatrixDevice& w, __nv_bfloat16* dense, cudaStream_t stream) {
  if (!ValidShape(w) || dense == nullptr) return cudaErrorInvalidValue;
  const int64_t words = w.rows * (w.cols / 8);
  if (words == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((words + kThreads - 1) / kThreads, 4096));
  DequantizeKernel<<<blocks, kThreads, 0, stream>>>(w, dense);
  return cudaGetLastError();
}

}  // namespace specd::kernels::cuda
