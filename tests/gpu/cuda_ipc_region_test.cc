#include "common/rpc/cuda_ipc_region.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/gpu/cuda_ipc_test_pattern.h"

namespace specd::rpc {
namespace {

bool ReadAll(int fd, void* data, std::size_t size) {
  auto* bytes = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t got = read(fd, bytes, size);
    if (got <= 0) return false;
    bytes += got;
    size -= got;
  }
  return true;
}

bool HaveDevice() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

v1::CudaIpcRegion WellFormedRegion() {
  v1::CudaIpcRegion region;
  region.set_memory_handle(std::string(sizeof(cudaIpcMemHandle_t), '\0'));
  region.set_event_handle(std::string(sizeof(cudaIpcEventHandle_t), '\0'));
  region.set_device_uuid("GPU-00000000-0000-0000-0000-000000000000");
  region.set_size_bytes(64);
  return region;
}

// Checked before any CUDA call, so this runs on machines without a device too.
TEST(CudaIpcMapping, OpenRejectsMalformedRegions) {
  v1::CudaIpcRegion short_memory_handle = WellFormedRegion();
  short_memory_handle.set_memory_handle("too short");
  EXPECT_EQ(CudaIpcMapping::Open(short_memory_handle).status().code(),
            absl::StatusCode::kInvalidArgument);
  v1::CudaIpcRegion short_event_handle = WellFormedRegion();
  short_event_handle.set_event_handle("too short");
  EXPECT_EQ(CudaIpcMapping::Open(short_event_handle).status().code(),
            absl::StatusCode::kInvalidArgument);
  v1::CudaIpcRegion no_uuid = WellFormedRegion();
  no_uuid.clear_device_uuid();
  EXPECT_EQ(CudaIpcMapping::Open(no_uuid).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CudaIpcMapping, OpenOfAnUnknownDeviceIsNotFound) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  const absl::StatusOr<CudaIpcMapping> mapping = CudaIpcMapping::Open(WellFormedRegion());
  EXPECT_EQ(mapping.status().code(), absl::StatusCode::kNotFound) << mapping.status();
}

TEST(CudaIpcBuffer, ExportsRegionNamingItsDevice) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  absl::StatusOr<CudaIpcBuffer> buffer = CudaIpcBuffer::Create(4096, 0);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  const v1::CudaIpcRegion& region = buffer->region();
  EXPECT_EQ(region.memory_handle().size(), sizeof(cudaIpcMemHandle_t));
  EXPECT_EQ(region.event_handle().size(), sizeof(cudaIpcEventHandle_t));
  EXPECT_EQ(region.device_index(), 0);
  EXPECT_EQ(region.size_bytes(), 4096u);
  // "GPU-" and 16 bytes as 8-4-4-4-12 hex digits, as nvidia-smi -L prints it.
  EXPECT_EQ(region.device_uuid().size(), 40u) << region.device_uuid();
  EXPECT_EQ(region.device_uuid().rfind("GPU-", 0), 0u) << region.device_uuid();
}

TEST(CudaIpcMapping, ReadsWhatAnotherProcessWroteAfterWaitingForItsEvent) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  int to_exporter[2];
  int from_exporter[2];
  ASSERT_EQ(pipe(to_exporter), 0);
  ASSERT_EQ(pipe(from_exporter), 0);
  // A fresh process image: CUDA cannot be used in a fork()ed child of a process that already
  // initialized it, as this one has.
  const pid_t exporter = fork();
  ASSERT_GE(exporter, 0);
  if (exporter == 0) {
    dup2(to_exporter[0], STDIN_FILENO);
    dup2(from_exporter[1], STDOUT_FILENO);
    for (int fd : {to_exporter[0], to_exporter[1], from_exporter[0], from_exporter[1]}) close(fd);
    execl(SPECD_CUDA_IPC_EXPORTER_FOR_TEST, SPECD_CUDA_IPC_EXPORTER_FOR_TEST,
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(to_exporter[0]);
  close(from_exporter[1]);

  uint32_t length = 0;
  std::string message;
  v1::CudaIpcRegion region;
  bool received = ReadAll(from_exporter[0], &length, sizeof(length));
  if (received) {
    message.resize(length);
    received = ReadAll(from_exporter[0], message.data(), length) && region.ParseFromString(message);
  }
  EXPECT_TRUE(received) << "the exporter sent no region (see its stderr)";
  if (received) {
    std::vector<uint32_t> host(test::kPatternWords, 0);
    {
      absl::StatusOr<CudaIpcMapping> mapping = CudaIpcMapping::Open(region);
      ASSERT_TRUE(mapping.ok()) << mapping.status();
      EXPECT_EQ(mapping->size(), host.size() * sizeof(uint32_t));
      ASSERT_EQ(cudaSetDevice(mapping->device()), cudaSuccess);
      cudaStream_t stream = nullptr;
      ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
      ASSERT_TRUE(mapping->WaitForWrites(stream).ok());
      ASSERT_EQ(cudaMemcpyAsync(host.data(), mapping->data(), mapping->size(),
                                cudaMemcpyDeviceToHost, stream),
                cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      cudaStreamDestroy(stream);
    }  // closes the mapping before the exporter frees the memory
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < host.size(); ++i) mismatches += host[i] != test::PatternWord(i);
    EXPECT_EQ(mismatches, 0u);
  }

  close(to_exporter[1]);  // EOF: the exporter may free the buffer
  close(from_exporter[0]);
  int wait_status = 0;
  ASSERT_EQ(waitpid(exporter, &wait_status, 0), exporter);
  EXPECT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0);
}

}  // namespace
}  // namespace specd::rpc
