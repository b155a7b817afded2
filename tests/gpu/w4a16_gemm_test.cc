#include "kernels/cuda/w4a16_gemm.h"

#include <cublas_v2.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace specd::kernels::cuda {
namespace {

// A device copy of a host vector, freed at scope exit.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : size_(host.size()) {
    if (cudaMalloc(&data_, std::max<std::size_t>(size_, 1) * sizeof(T)) == cudaSuccess) {
      cudaMemcpy(data_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice);
    }
  }
  explicit DeviceArray(std::size_t size) : DeviceArray(std::vector<T>(size)) {}
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(data_); }

  T* get() const { return data_; }
  std::vector<T> ToHost() const {
    std::vector<T> host(size_);
    EXPECT_EQ(cudaMemcpy(host.data(), data_, size_ * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }

 private:
  T* data_ = nullptr;
  std::size_t size_;
};

// Random INT4 weights in the pack-quantized layout, plus their exact float values.
struct HostInt4Matrix {
  int64_t rows, cols, group_size;
  std::vector<int32_t> packed;
  std::vector<__nv_bfloat16> scales;
  std::vector<int8_t> zero_points;  // empty: symmetric

  HostInt4Matrix(int64_t n, int64_t k, int64_t group, bool asymmetric, uint32_t seed)
      : rows(n), cols(k), group_size(group), packed(n * k / 8), scales(n * k / group) {
    std::mt19937 rng(seed);
    for (int32_t& word : packed) word = static_cast<int32_t>(rng());
    std::uniform_real_distribution<float> scale(0.005f, 0.02f);
    for (__nv_bfloat16& s : scales) s = __float2bfloat16(scale(rng));
    if (asymmetric) {
      zero_points.resize(scales.size());
      std::uniform_int_distribution<int> zero_point(-8, 7);
      for (int8_t& z : zero_points) z = static_cast<int8_t>(zero_point(rng));
    }
  }

  float At(int64_t n, int64_t k) const {
    const int q = static_cast<int>(
                      static_cast<uint32_t>(packed[n * cols / 8 + k / 8]) >> (4 * (k % 8)) & 0xF) -
                  8;
    const int64_t g = n * (cols / group_size) + k / group_size;
    const int z = zero_points.empty() ? 0 : zero_points[g];
    return static_cast<float>(q - z) * __bfloat162float(scales[g]);
  }
};

// HostInt4Matrix on the device.
struct DeviceInt4Matrix {
  explicit DeviceInt4Matrix(const HostInt4Matrix& host)
      : packed(host.packed), scales(host.scales), zero_points(host.zero_points) {
    view = {packed.get(), scales.get(), host.zero_points.empty() ? nullptr : zero_points.get(),
            host.rows,    host.cols,    host.group_size};
  }
  DeviceArray<int32_t> packed;
  DeviceArray<__nv_bfloat16> scales;
  DeviceArray<int8_t> zero_points;
  Int4MatrixDevice view;
};

std::vector<__nv_bfloat16> RandomActivations(int64_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<__nv_bfloat16> x(size);
  for (__nv_bfloat16& v : x) v = __float2bfloat16(normal(rng));
  return x;
}

// Every output within 1% of its reference plus `floor` times the largest reference magnitude:
// bf16 rounds the output to 2^-9 relative, and near-zero outputs are sums that cancelled.
void ExpectClose(const std::vector<__nv_bfloat16>& got, const std::vector<float>& want,
                 float floor) {
  ASSERT_EQ(got.size(), want.size());
  float scale = 0.0f;
  for (float v : want) scale = std::max(scale, std::fabs(v));
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float g = __bfloat162float(got[i]);
    if (!(std::fabs(g - want[i]) <= 0.01f * std::fabs(want[i]) + floor * scale) && ++bad <= 5) {
      ADD_FAILURE() << "output " << i << ": got " << g << ", want " << want[i];
    }
  }
  EXPECT_EQ(bad, 0) << "of " << got.size() << " outputs (scale " << scale << ")";
}

class W4A16GemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      GTEST_SKIP() << "no CUDA device";
    }
    ASSERT_EQ(cublasCreate(&cublas_), CUBLAS_STATUS_SUCCESS);
  }
  void TearDown() override {
    if (cublas_ != nullptr) cublasDestroy(cublas_);
  }

  // W4A16Gemm against cublasGemmEx (float32 compute and output) on the dequantized weights.
  void ExpectMatchesCublas(int64_t n, int64_t k, int64_t group, bool asymmetric) {
    const HostInt4Matrix host(n, k, group, asymmetric, static_cast<uint32_t>(n * 7 + k));
    const DeviceInt4Matrix w(host);
    DeviceArray<__nv_bfloat16> dense(static_cast<std::size_t>(n * k));
    ASSERT_EQ(DequantizeToBf16(w.view, dense.get(), nullptr), cudaSuccess);
    for (int64_t m : {1, 2, 3, 4, 8, 16, 32, 40}) {
      SCOPED_TRACE(testing::Message() << "N " << n << " K " << k << " group " << group
                                      << (asymmetric ? " asymmetric" : " symmetric") << " M " << m);
      const DeviceArray<__nv_bfloat16> x(RandomActivations(m * k, static_cast<uint32_t>(m)));
      DeviceArray<__nv_bfloat16> y(static_cast<std::size_t>(m * n));
      DeviceArray<float> want(static_cast<std::size_t>(m * n));
      ASSERT_EQ(W4A16Gemm(x.get(), m, w.view, y.get(), nullptr), cudaSuccess);
      // Row-major y [M, N] is column-major yᵀ [N, M] = W · xᵀ, with W read as column-major [K, N].
      const float one = 1.0f, zero = 0.0f;
      ASSERT_EQ(
          cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                       static_cast<int>(k), &one, dense.get(), CUDA_R_16BF, static_cast<int>(k),
                       x.get(), CUDA_R_16BF, static_cast<int>(k), &zero, want.get(), CUDA_R_32F,
                       static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          CUBLAS_STATUS_SUCCESS);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ExpectClose(y.ToHost(), want.ToHost(), 1e-3f);
    }
  }

  cublasHandle_t cublas_ = nullptr;
};

// N = 1000, 200 and 72 are not multiples of the 16-row tile; K = 320 ends in a partial
// 128-column step; M = 3 and 40 are not powers of two, and 40 runs as two launches.
TEST_F(W4A16GemmTest, SymmetricGroup128MatchesCublas) {
  ExpectMatchesCublas(256, 512, 128, false);
  ExpectMatchesCublas(1000, 2560, 128, false);
}

TEST_F(W4A16GemmTest, AsymmetricGroup32MatchesCublas) {
  ExpectMatchesCublas(200, 320, 32, true);
  ExpectMatchesCublas(2560, 1024, 32, true);
}

TEST_F(W4A16GemmTest, ChannelWiseMatchesCublas) {
  ExpectMatchesCublas(200, 2560, 2560, false);
  ExpectMatchesCublas(72, 4096, 4096, true);
}

// K = 200 is not a multiple of 32 (word-wise loads) and groups of 8 give each word its own scale.
TEST_F(W4A16GemmTest, SmallGroupsAndOddKMatchCublas) {
  ExpectMatchesCublas(40, 200, 8, true);
  ExpectMatchesCublas(48, 200, 200, false);
}

// The definition itself, on the host in double: y = Σ_k x·(q - z)·s with unrounded weights.
TEST_F(W4A16GemmTest, MatchesHostReference) {
  const int64_t n = 40, k = 256, m = 3;
  const HostInt4Matrix host(n, k, 64, true, 11);
  const DeviceInt4Matrix w(host);
  const std::vector<__nv_bfloat16> x_host = RandomActivations(m * k, 12);
  const DeviceArray<__nv_bfloat16> x(x_host);
  DeviceArray<__nv_bfloat16> y(m * n);
  ASSERT_EQ(W4A16Gemm(x.get(), m, w.view, y.get(), nullptr), cudaSuccess);
  std::vector<float> want(m * n);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      double sum = 0.0;
      for (int64_t i = 0; i < k; ++i) {
        sum += static_cast<double>(__bfloat162float(x_host[r * k + i])) * host.At(c, i);
      }
      want[r * n + c] = static_cast<float>(sum);
    }
  }
  // The kernel rounds each weight to bf16 (2^-9 relative), a random error over the K terms.
  ExpectClose(y.ToHost(), want, 5e-3f);
}

// Shape checks come before any CUDA call, so this runs without a device too.
TEST(W4A16GemmShapes, RejectsBadShapes) {
  alignas(16) static const int32_t packed[64] = {};
  alignas(16) static const __nv_bfloat16 scales[64] = {};
  alignas(16) __nv_bfloat16 x[64] = {}, y[64] = {};
  const Int4MatrixDevice good{packed, scales, nullptr, 2, 64, 32};
  auto with = [&](auto change) {
    Int4MatrixDevice w = good;
    change(w);
    return w;
  };
  const Int4MatrixDevice bad[] = {
      with([](Int4MatrixDevice& w) { w.cols = 60; }),        // K not a multiple of 8
      with([](Int4MatrixDevice& w) { w.group_size = 12; }),  // group not a multiple of 8
      with([](Int4MatrixDevice& w) { w.group_size = 48; }),  // group does not divide K
      with([](Int4MatrixDevice& w) { w.group_size = 0; }),
      with([](Int4MatrixDevice& w) { w.rows = -1; }),
      with([](Int4MatrixDevice& w) { w.scales = nullptr; }),
  };
  for (const Int4MatrixDevice& w : bad) {
    EXPECT_EQ(W4A16Gemm(x, 1, w, y, nullptr), cudaErrorInvalidValue);
    EXPECT_EQ(DequantizeToBf16(w, y, nullptr), cudaErrorInvalidValue);
  }
  EXPECT_EQ(W4A16Gemm(x + 1, 1, good, y, nullptr), cudaErrorInvalidValue);  // x not 16-byte aligned
  EXPECT_EQ(W4A16Gemm(x, -1, good, y, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(W4A16Gemm(x, 0, good, y, nullptr), cudaSuccess);  // nothing to do
}

}  // namespace
}  // namespace specd::kernels::cuda
