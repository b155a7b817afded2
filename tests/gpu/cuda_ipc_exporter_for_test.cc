// Test helper for cuda_ipc_region_test: exports a CUDA IPC buffer, starts an asynchronous copy of
// the test pattern into it, records the write event and, without waiting for the copy, writes the
// v1::CudaIpcRegion (a 4-byte length, then the serialized message) to stdout. Keeps the buffer
// until stdin reaches EOF or a byte, then exits 0; any failure is printed to stderr, exit 1.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "common/rpc/cuda_ipc_region.h"
#include "tests/gpu/cuda_ipc_test_pattern.h"

namespace {

bool WriteAll(int fd, const void* data, std::size_t size) {
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = write(fd, bytes, size);
    if (written <= 0) return false;
    bytes += written;
    size -= written;
  }
  return true;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "cuda_ipc_exporter_for_test: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main() {
  using specd::rpc::test::kPatternWords;
  constexpr std::size_t kBytes = kPatternWords * sizeof(uint32_t);
  absl::StatusOr<specd::rpc::CudaIpcBuffer> buffer = specd::rpc::CudaIpcBuffer::Create(kBytes, 0);
  if (!buffer.ok()) return Fail(buffer.status().ToString());
  // Pinned, so that the copy is truly asynchronous and only the event orders the reader after it.
  void* pinned = nullptr;
  if (cudaMallocHost(&pinned, kBytes) != cudaSuccess) return Fail("cudaMallocHost");
  auto* pattern = static_cast<uint32_t*>(pinned);
  for (std::size_t i = 0; i < kPatternWords; ++i) pattern[i] = specd::rpc::test::PatternWord(i);
  cudaStream_t stream = nullptr;
  if (cudaStreamCreate(&stream) != cudaSuccess) return Fail("cudaStreamCreate");
  if (cudaMemcpyAsync(buffer->data(), pattern, kBytes, cudaMemcpyHostToDevice, stream) !=
      cudaSuccess) {
    return Fail("cudaMemcpyAsync");
  }
  if (absl::Status recorded = buffer->RecordWrite(stream); !recorded.ok()) {
    return Fail(recorded.ToString());
  }

  const std::string message = buffer->region().SerializeAsString();
  const uint32_t length = message.size();
  if (!WriteAll(STDOUT_FILENO, &length, sizeof(length)) ||
      !WriteAll(STDOUT_FILENO, message.data(), message.size())) {
    return Fail("writing the region to stdout");
  }
  char done;
  (void)read(STDIN_FILENO, &done, 1);
  cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  cudaFreeHost(pattern);
  return 0;
}
