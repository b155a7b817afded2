#include "kernels/cuda/device_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace specd::kernels::cuda {
namespace {

class DeviceCopyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      GTEST_SKIP() << "no CUDA device";
    }
  }
};

TEST_F(DeviceCopyTest, MatchesCudaMemcpyByteForByte) {
  for (std::size_t bytes : {16ul, 4096ul, (64ul << 20) + 16}) {
    std::vector<std::uint8_t> host(bytes);
    for (std::size_t i = 0; i < bytes; ++i) host[i] = static_cast<std::uint8_t>(i * 131 + 7);
    void *src = nullptr, *dst = nullptr;
    ASSERT_EQ(cudaMalloc(&src, bytes), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dst, bytes), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(src, host.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemset(dst, 0, bytes), cudaSuccess);
    ASSERT_EQ(LaunchDeviceCopy(dst, src, bytes, nullptr), cudaSuccess);
    std::vector<std::uint8_t> back(bytes);
    ASSERT_EQ(cudaMemcpy(back.data(), dst, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(back, host) << bytes << " bytes";
    cudaFree(src);
    cudaFree(dst);
  }
}

TEST_F(DeviceCopyTest, RejectsSizesThatAreNotWholeVectors) {
  void* buffer = nullptr;
  ASSERT_EQ(cudaMalloc(&buffer, 64), cudaSuccess);
  EXPECT_EQ(LaunchDeviceCopy(buffer, static_cast<char*>(buffer) + 32, 17, nullptr),
            cudaErrorInvalidValue);
  cudaFree(buffer);
}

}  // namespace
}  // namespace specd::kernels::cuda
