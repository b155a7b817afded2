#include "common/rpc/cuda_ipc_region.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace specd::rpc {
namespace {

// Turns a CUDA runtime error into a status that names the call, and clears it from the runtime's
// last-error slot so that it does not surface again in an unrelated call.
absl::Status CudaStatus(cudaError_t error, const std::string& what) {
  if (error == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();
  std::string message =
      absl::StrCat(what, ": ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return absl::FailedPreconditionError(message);
    case cudaErrorInvalidDevice:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

// The UUID as nvidia-smi prints it: "GPU-" and 16 bytes in 4-2-2-2-6 groups of lower-case hex.
std::string FormatUuid(const cudaUUID_t& uuid) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(uuid.bytes);
  std::string text = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    char hex[3];
    std::snprintf(hex, sizeof(hex), "%02x", bytes[i]);
    text += hex;
  }
  return text;
}

absl::StatusOr<std::string> DeviceUuid(int device) {
  cudaDeviceProp properties;
  if (absl::Status status = CudaStatus(cudaGetDeviceProperties(&properties, device),
                                       absl::StrCat("cudaGetDeviceProperties(", device, ")"));
      !status.ok()) {
    return status;
  }
  return FormatUuid(properties.uuid);
}

// This process's ordinal of the device with `uuid`, trying `hint` first.
absl::StatusOr<int> FindDevice(const std::string& uuid, int hint) {
  int count = 0;
  if (absl::Status status = CudaStatus(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
      !status.ok()) {
    return status;
  }
  if (hint >= 0 && hint < count) {
    absl::StatusOr<std::string> hinted = DeviceUuid(hint);
    if (hinted.ok() && *hinted == uuid) return hint;
  }
  for (int device = 0; device < count; ++device) {
    absl::StatusOr<std::string> candidate = DeviceUuid(device);
    if (!candidate.ok()) return candidate.status();
    if (*candidate == uuid) return device;
  }
  return absl::NotFoundError(absl::StrCat("CUDA device ", uuid, " is not among the ", count,
                                          " devices this process sees (CUDA_VISIBLE_DEVICES?)"));
}

// Makes `device` current for one scope and restores the caller's device after it.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    status_ = CudaStatus(cudaSetDevice(device), absl::StrCat("cudaSetDevice(", device, ")"));
  }
  ~ScopedDevice() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  const absl::Status& status() const { return status_; }

 private:
  int previous_ = -1;
  absl::Status status_;
};

// The buffers this process exports, by memory handle bytes: what a consumer in the same process
// maps (CUDA opens no process's own handles).
struct ExportedBuffer {
  void* data;
  cudaEvent_t event;
  int device;
};

std::mutex& ExportsMutex() {
  static std::mutex mutex;
  return mutex;
}

std::map<std::string, ExportedBuffer>& Exports() {
  static auto* exports = new std::map<std::string, ExportedBuffer>();
  return *exports;
}

// The region of the allocation at `base` on `device` with `event` (none: memory that never
// changes), registered as this process's own export.
absl::StatusOr<v1::CudaIpcRegion> ExportRegion(void* base, uint64_t size_bytes, int device,
                                               cudaEvent_t event) {
  ScopedDevice scoped_device(device);
  if (!scoped_device.status().ok()) return scoped_device.status();
  absl::StatusOr<std::string> uuid = DeviceUuid(device);
  if (!uuid.ok()) return uuid.status();
  cudaIpcMemHandle_t memory_handle;
  if (absl::Status status =
          CudaStatus(cudaIpcGetMemHandle(&memory_handle, base), "cudaIpcGetMemHandle");
      !status.ok()) {
    return status;
  }
  v1::CudaIpcRegion region;
  region.set_memory_handle(memory_handle.reserved, sizeof(memory_handle.reserved));
  if (event != nullptr) {
    cudaIpcEventHandle_t event_handle;
    if (absl::Status status =
            CudaStatus(cudaIpcGetEventHandle(&event_handle, event), "cudaIpcGetEventHandle");
        !status.ok()) {
      return status;
    }
    region.set_event_handle(event_handle.reserved, sizeof(event_handle.reserved));
  }
  region.set_device_index(device);
  region.set_device_uuid(*std::move(uuid));
  region.set_size_bytes(size_bytes);
  std::lock_guard lock(ExportsMutex());
  Exports()[region.memory_handle()] = {.data = base, .event = event, .device = device};
  return region;
}

}  // namespace

absl::StatusOr<CudaIpcBuffer> CudaIpcBuffer::Create(uint64_t size_bytes, int device) {
  if (size_bytes == 0) return absl::InvalidArgumentError("CUDA IPC buffer size must be positive");
  ScopedDevice scoped_device(device);
  if (!scoped_device.status().ok()) return scoped_device.status();
  void* data = nullptr;
  if (absl::Status status =
          CudaStatus(cudaMalloc(&data, size_bytes),
                     absl::StrCat("cudaMalloc(", size_bytes, " bytes) on device ", device));
      !status.ok()) {
    return status;
  }
  cudaEvent_t event = nullptr;
  const absl::Status created =
      CudaStatus(cudaEventCreateWithFlags(&event, cudaEventInterprocess | cudaEventDisableTiming),
                 "cudaEventCreateWithFlags(interprocess)");
  absl::StatusOr<v1::CudaIpcRegion> region = created.ok()
                                                 ? ExportRegion(data, size_bytes, device, event)
                                                 : absl::StatusOr<v1::CudaIpcRegion>(created);
  if (!region.ok()) {
    if (event != nullptr) cudaEventDestroy(event);
    cudaFree(data);
    return region.status();
  }
  return CudaIpcBuffer(data, event, *std::move(region));
}

CudaIpcBuffer::CudaIpcBuffer(void* data, cudaEvent_t event, v1::CudaIpcRegion region)
    : data_(data), event_(event), region_(std::move(region)) {}

CudaIpcBuffer::CudaIpcBuffer(CudaIpcBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      event_(std::exchange(other.event_, nullptr)),
      region_(std::move(other.region_)) {}

CudaIpcBuffer& CudaIpcBuffer::operator=(CudaIpcBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    event_ = std::exchange(other.event_, nullptr);
    region_ = std::move(other.region_);
  }
  return *this;
}

CudaIpcBuffer::~CudaIpcBuffer() { Reset(); }

void CudaIpcBuffer::Reset() {
  if (data_ != nullptr) {
    std::lock_guard lock(ExportsMutex());
    Exports().erase(region_.memory_handle());
  }
  if (event_ != nullptr) cudaEventDestroy(std::exchange(event_, nullptr));
  if (data_ != nullptr) cudaFree(std::exchange(data_, nullptr));
  region_.Clear();
}

absl::Status CudaIpcBuffer::RecordWrite(cudaStream_t stream) {
  return CudaStatus(cudaEventRecord(event_, stream), "cudaEventRecord(interprocess event)");
}

absl::StatusOr<v1::CudaIpcRegion> ExportAllocation(void* base, uint64_t size_bytes, int device) {
  if (base == nullptr || size_bytes == 0) {
    return absl::InvalidArgumentError("exporting an empty allocation");
  }
  return ExportRegion(base, size_bytes, device, /*event=*/nullptr);
}

absl::StatusOr<CudaIpcMapping> CudaIpcMapping::Open(const v1::CudaIpcRegion& region) {
  if (region.memory_handle().size() != sizeof(cudaIpcMemHandle_t)) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA IPC memory handle has ",
                                                   region.memory_handle().size(), " bytes, not ",
                                                   sizeof(cudaIpcMemHandle_t)));
  }
  if (!region.event_handle().empty() &&
      region.event_handle().size() != sizeof(cudaIpcEventHandle_t)) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA IPC event handle has ", region.event_handle().size(),
                     " bytes, not 0 or ", sizeof(cudaIpcEventHandle_t)));
  }
  if (region.device_uuid().empty()) {
    return absl::InvalidArgumentError("CUDA IPC region names no device_uuid");
  }
  {
    std::lock_guard lock(ExportsMutex());
    if (const auto own = Exports().find(region.memory_handle()); own != Exports().end()) {
      return CudaIpcMapping(own->second.data,
                            region.event_handle().empty() ? nullptr : own->second.event,
                            region.size_bytes(), own->second.device, /*opened=*/false);
    }
  }
  absl::StatusOr<int> device = FindDevice(region.device_uuid(), region.device_index());
  if (!device.ok()) return device.status();
  ScopedDevice scoped_device(*device);
  if (!scoped_device.status().ok()) return scoped_device.status();

  cudaIpcMemHandle_t memory_handle;
  std::memcpy(memory_handle.reserved, region.memory_handle().data(), sizeof(memory_handle));
  void* data = nullptr;
  if (absl::Status status =
          CudaStatus(cudaIpcOpenMemHandle(&data, memory_handle, cudaIpcMemLazyEnablePeerAccess),
                     absl::StrCat("cudaIpcOpenMemHandle on ", region.device_uuid()));
      !status.ok()) {
    return status;
  }
  cudaEvent_t event = nullptr;
  if (!region.event_handle().empty()) {
    cudaIpcEventHandle_t event_handle;
    std::memcpy(event_handle.reserved, region.event_handle().data(), sizeof(event_handle));
    if (absl::Status status =
            CudaStatus(cudaIpcOpenEventHandle(&event, event_handle), "cudaIpcOpenEventHandle");
        !status.ok()) {
      cudaIpcCloseMemHandle(data);
      return status;
    }
  }
  return CudaIpcMapping(data, event, region.size_bytes(), *device, /*opened=*/true);
}

CudaIpcMapping::CudaIpcMapping(void* data, cudaEvent_t event, uint64_t size, int device,
                               bool opened)
    : data_(data), event_(event), size_(size), device_(device), opened_(opened) {}

CudaIpcMapping::CudaIpcMapping(CudaIpcMapping&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      event_(std::exchange(other.event_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      device_(std::exchange(other.device_, -1)),
      opened_(std::exchange(other.opened_, false)) {}

CudaIpcMapping& CudaIpcMapping::operator=(CudaIpcMapping&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    event_ = std::exchange(other.event_, nullptr);
    size_ = std::exchange(other.size_, 0);
    device_ = std::exchange(other.device_, -1);
    opened_ = std::exchange(other.opened_, false);
  }
  return *this;
}

CudaIpcMapping::~CudaIpcMapping() { Reset(); }

void CudaIpcMapping::Reset() {
  if (opened_) {
    if (event_ != nullptr) cudaEventDestroy(event_);
    if (data_ != nullptr) cudaIpcCloseMemHandle(data_);
  }
  event_ = nullptr;
  data_ = nullptr;
  size_ = 0;
  device_ = -1;
  opened_ = false;
}

absl::Status CudaIpcMapping::WaitForWrites(cudaStream_t stream) {
  if (event_ == nullptr) return absl::OkStatus();
  return CudaStatus(cudaStreamWaitEvent(stream, event_, 0),
                    "cudaStreamWaitEvent(interprocess event)");
}

}  // namespace specd::rpc
