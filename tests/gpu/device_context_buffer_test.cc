// Context rows in device memory, as a verifier and a drafter in one process share them (services
// in one process; across processes the same handle maps through CUDA IPC, which
// cuda_ipc_region_test proves): what the owner wrote on its stream is what the reader's stream
// reads after waiting, and the handles obey the host buffers' rules. Skipped without a device.
#include "common/rpc/device_context_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace specd::rpc {
namespace {

constexpr int64_t kRows = 8;
constexpr int64_t kWidth = 3;

bool HaveDevice() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

class DeviceContextBufferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&writer_), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&reader_), cudaSuccess);
  }
  void TearDown() override {
    if (writer_ != nullptr) cudaStreamDestroy(writer_);
    if (reader_ != nullptr) cudaStreamDestroy(reader_);
  }

  // Rows [begin, begin + count) of float32 values 100 p + c, staged on the device.
  float* DeviceRows(int64_t begin, int64_t count) {
    std::vector<float> host;
    for (int64_t p = begin; p < begin + count; ++p) {
      for (int64_t c = 0; c < kWidth; ++c) host.push_back(static_cast<float>(100 * p + c));
    }
    void* device = nullptr;
    EXPECT_EQ(cudaMalloc(&device, host.size() * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(device, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    staged_.push_back(device);
    return static_cast<float*>(device);
  }

  std::vector<float> ReadBack(DeviceContextReader& reader, int64_t position) {
    std::vector<float> row(kWidth);
    EXPECT_TRUE(reader.WaitForWrites(reader_).ok());
    EXPECT_EQ(cudaMemcpyAsync(row.data(), reader.Row(position), kWidth * sizeof(float),
                              cudaMemcpyDeviceToHost, reader_),
              cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(reader_), cudaSuccess);
    return row;
  }

  ~DeviceContextBufferTest() override {
    for (void* device : staged_) cudaFree(device);
  }

  cudaStream_t writer_ = nullptr;
  cudaStream_t reader_ = nullptr;
  std::vector<void*> staged_;
};

TEST_F(DeviceContextBufferTest, ReaderSeesTheRowsTheOwnerWroteOnItsStream) {
  absl::StatusOr<DeviceContextBuffer> buffer =
      DeviceContextBuffer::Create("verifier-a", 1, kRows, kWidth, v1::DTYPE_FLOAT32, 0);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  ASSERT_TRUE(buffer->WriteRows(2, DeviceRows(2, 3), 3, writer_).ok());
  const v1::TensorHandle handle = buffer->Publish(2, 5);
  ASSERT_TRUE(handle.has_cuda_ipc());
  EXPECT_EQ(handle.dtype(), v1::DTYPE_FLOAT32);
  EXPECT_EQ(handle.byte_size(), uint64_t{kRows * kWidth * 4});
  EXPECT_EQ(handle.generation(), 1u);

  DeviceContextReader reader(kWidth);
  ASSERT_TRUE(reader.Accept(handle).ok());
  EXPECT_EQ(reader.rows(), kRows);
  EXPECT_EQ(reader.device(), 0);
  EXPECT_EQ(ReadBack(reader, 4), (std::vector<float>{400, 401, 402}));
  // The next write, published at generation 2, overwrites position 4.
  ASSERT_TRUE(buffer->WriteRows(4, DeviceRows(40, 1), 1, writer_).ok());
  ASSERT_TRUE(reader.Accept(buffer->Publish(2, 5)).ok());
  EXPECT_EQ(ReadBack(reader, 4), (std::vector<float>{4000, 4001, 4002}));
  // A handle of generation 1 is now stale.
  EXPECT_EQ(reader.Accept(handle).code(), absl::StatusCode::kAborted);
}

TEST_F(DeviceContextBufferTest, RefusesWhatTheHostBuffersRefuse) {
  absl::StatusOr<DeviceContextBuffer> buffer =
      DeviceContextBuffer::Create("verifier-a", 1, kRows, kWidth, v1::DTYPE_BFLOAT16, 0);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(buffer->WriteRows(kRows - 1, DeviceRows(0, 2), 2, writer_).code(),
            absl::StatusCode::kOutOfRange);
  const v1::TensorHandle handle = buffer->Publish(0, 1);
  EXPECT_EQ(handle.dtype(), v1::DTYPE_BFLOAT16);
  EXPECT_EQ(handle.byte_size(), uint64_t{kRows * kWidth * 2});
  EXPECT_EQ(DeviceContextReader(kWidth + 1).Accept(handle).code(),
            absl::StatusCode::kInvalidArgument);
  v1::TensorHandle float_sized = handle;
  float_sized.set_dtype(v1::DTYPE_FLOAT32);
  EXPECT_EQ(DeviceContextReader(kWidth).Accept(float_sized).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DeviceContextBuffer::Create("v", 1, kRows, kWidth, v1::DTYPE_INT32, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace specd::rpc
