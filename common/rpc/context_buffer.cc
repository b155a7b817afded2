#include "common/rpc/context_buffer.h"

#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace specd::rpc {
namespace {

constexpr int64_t kFloatBytes = sizeof(float);

// Token positions are uint32 in the contract (TokenRange).
constexpr int64_t kMaxRows = std::numeric_limits<uint32_t>::max();

// rows × width × element_bytes without overflow; 0 when it would not fit in an int64.
uint64_t TensorBytes(int64_t rows, int64_t width, int64_t element_bytes = kFloatBytes) {
  if (rows <= 0 || width <= 0) return 0;
  if (width > std::numeric_limits<int64_t>::max() / element_bytes / rows) return 0;
  return static_cast<uint64_t>(rows * width * element_bytes);
}

std::string Describe(const v1::TensorHandle& handle) {
  return absl::StrCat("context handle (owner ", handle.owner_instance_id(), ", buffer ",
                      handle.buffer_id(), ", generation ", handle.generation(), ")");
}

// The bytes of an element of `dtype` where the handle's memory may carry it; 0 where not.
int64_t ElementBytes(const v1::TensorHandle& handle) {
  switch (handle.dtype()) {
    case v1::DTYPE_FLOAT32:
      return 4;
    case v1::DTYPE_BFLOAT16:
      return handle.has_cuda_ipc() ? 2 : 0;
    default:
      return 0;
  }
}

}  // namespace

absl::StatusOr<ContextLayout> CheckContextHandle(const v1::TensorHandle& handle, int64_t width) {
  ContextLayout layout;
  if (handle.has_posix_shm()) {
    layout.region = handle.posix_shm().name();
    layout.region_bytes = handle.posix_shm().size_bytes();
  } else if (handle.has_cuda_ipc()) {
    layout.region = handle.cuda_ipc().memory_handle();
    layout.region_bytes = handle.cuda_ipc().size_bytes();
  } else {
    return absl::InvalidArgumentError(absl::StrCat(Describe(handle), " names no memory"));
  }
  layout.element_bytes = ElementBytes(handle);
  if (layout.element_bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(handle), " has dtype ", v1::Dtype_Name(handle.dtype()), ", not ",
                     handle.has_cuda_ipc() ? "DTYPE_FLOAT32 or DTYPE_BFLOAT16" : "DTYPE_FLOAT32"));
  }
  if (handle.shape_size() != 2 || handle.shape(0) < 1 || handle.shape(0) > kMaxRows ||
      handle.shape(1) != width) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(handle), " has shape [",
                                                   absl::StrJoin(handle.shape(), ", "),
                                                   "], not [rows ≥ 1, ", width, "]"));
  }
  layout.rows = handle.shape(0);
  if (!handle.strides().empty() &&
      !(handle.strides_size() == 2 && handle.strides(0) == width && handle.strides(1) == 1)) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(handle), " has strides [",
                                                   absl::StrJoin(handle.strides(), ", "),
                                                   "], not contiguous rows"));
  }
  const uint64_t expected_bytes = TensorBytes(layout.rows, width, layout.element_bytes);
  if (expected_bytes == 0 || handle.byte_size() != expected_bytes ||
      handle.byte_offset() % layout.element_bytes != 0 ||
      handle.byte_offset() > layout.region_bytes ||
      handle.byte_size() > layout.region_bytes - handle.byte_offset()) {
    return absl::InvalidArgumentError(absl::StrCat(
        Describe(handle), ": byte_offset ", handle.byte_offset(), " and byte_size ",
        handle.byte_size(), " do not fit ", v1::Dtype_Name(handle.dtype()), " [", layout.rows, ", ",
        width, "] (", expected_bytes, " bytes) in a region of ", layout.region_bytes, " bytes"));
  }
  const v1::TokenRange& range = handle.token_range();
  if (range.begin() > range.end() || range.end() > layout.rows) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(handle), " names rows [", range.begin(),
                                                   ", ", range.end(), ") outside [0, ", layout.rows,
                                                   "]"));
  }
  if (handle.generation() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(handle), " has generation 0, which only unchanging memory uses"));
  }
  return layout;
}

int64_t ContextElementBytes(v1::Dtype dtype) {
  return dtype == v1::DTYPE_BFLOAT16 ? 2 : kFloatBytes;
}

absl::StatusOr<uint64_t> ContextBufferBytes(int64_t rows, int64_t width, int64_t element_bytes) {
  const uint64_t bytes = TensorBytes(rows, width, element_bytes);
  if (rows < 1 || rows > kMaxRows || width < 1 || bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat("context buffer shape [", rows, ", ", width,
                                                   "] needs rows in [1, ", kMaxRows,
                                                   "], width ≥ 1 and a byte size that fits"));
  }
  return bytes;
}

absl::Status CheckRowsToWrite(int64_t begin, int64_t count, int64_t rows, const void* data) {
  if (begin < 0 || count < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("context rows [", begin, ", +", count, ") have a negative bound"));
  }
  if (begin > rows || count > rows - begin) {
    return absl::OutOfRangeError(absl::StrCat("context rows [", begin, ", ", begin + count,
                                              ") exceed the buffer's ", rows, " rows"));
  }
  if (count > 0 && data == nullptr) {
    return absl::InvalidArgumentError("context rows to write are null");
  }
  return absl::OkStatus();
}

v1::TensorHandle ContextHandle(const std::string& owner_instance_id, uint64_t buffer_id,
                               v1::Dtype dtype, int64_t rows, int64_t width, int64_t begin,
                               int64_t end, uint64_t generation) {
  v1::TensorHandle handle;
  handle.set_owner_instance_id(owner_instance_id);
  handle.set_buffer_id(buffer_id);
  handle.set_dtype(dtype);
  handle.add_shape(rows);
  handle.add_shape(width);
  handle.set_byte_offset(0);
  handle.set_byte_size(TensorBytes(rows, width, ContextElementBytes(dtype)));
  handle.mutable_token_range()->set_begin(static_cast<uint32_t>(begin));
  handle.mutable_token_range()->set_end(static_cast<uint32_t>(end));
  handle.set_generation(generation);
  return handle;
}

absl::StatusOr<bool> AcceptedContext::IsMapped(const v1::TensorHandle& handle,
                                               const ContextLayout& layout) const {
  if (!mapped_ || handle.owner_instance_id() != owner_instance_id_ ||
      handle.buffer_id() != buffer_id_) {
    return false;
  }
  if (layout.region != layout_.region || layout.region_bytes != layout_.region_bytes ||
      layout.rows != layout_.rows || layout.element_bytes != layout_.element_bytes ||
      handle.byte_offset() != byte_offset_) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(handle), " names a region of ", layout.region_bytes, " bytes with ",
                     layout.rows, " rows, but this buffer was mapped from another region (",
                     layout_.region_bytes, " bytes) with ", layout_.rows, " rows"));
  }
  // Equal generations are a retry of the same call and read the same rows.
  if (handle.generation() < generation_) {
    return absl::AbortedError(absl::StrCat(Describe(handle), " is stale: generation ", generation_,
                                           " was already accepted"));
  }
  return true;
}

void AcceptedContext::Record(const v1::TensorHandle& handle, const ContextLayout& layout) {
  mapped_ = true;
  owner_instance_id_ = handle.owner_instance_id();
  buffer_id_ = handle.buffer_id();
  layout_ = layout;
  byte_offset_ = handle.byte_offset();
  generation_ = handle.generation();
  valid_begin_ = handle.token_range().begin();
  valid_end_ = handle.token_range().end();
}

absl::StatusOr<ContextBuffer> ContextBuffer::Create(std::string owner_instance_id,
                                                    uint64_t buffer_id, int64_t rows,
                                                    int64_t width) {
  absl::StatusOr<uint64_t> bytes = ContextBufferBytes(rows, width, kFloatBytes);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<SharedMemoryRegion> region = SharedMemoryRegion::Create(*bytes);
  if (!region.ok()) return region.status();
  return ContextBuffer(*std::move(region), std::move(owner_instance_id), buffer_id, rows, width);
}

ContextBuffer::ContextBuffer(SharedMemoryRegion region, std::string owner_instance_id,
                             uint64_t buffer_id, int64_t rows, int64_t width)
    : region_(std::move(region)),
      owner_instance_id_(std::move(owner_instance_id)),
      buffer_id_(buffer_id),
      rows_(rows),
      width_(width) {}

absl::Status ContextBuffer::WriteRows(int64_t begin, const float* data, int64_t count) {
  if (absl::Status fits = CheckRowsToWrite(begin, count, rows_, data); !fits.ok()) return fits;
  if (count == 0) return absl::OkStatus();
  std::memcpy(region_.data() + begin * width_ * kFloatBytes, data,
              static_cast<size_t>(count * width_ * kFloatBytes));
  return absl::OkStatus();
}

v1::TensorHandle ContextBuffer::Publish(int64_t begin, int64_t end) {
  v1::TensorHandle handle = ContextHandle(owner_instance_id_, buffer_id_, v1::DTYPE_FLOAT32, rows_,
                                          width_, begin, end, ++generation_);
  v1::PosixShmRegion& shm = *handle.mutable_posix_shm();
  shm.set_name(region_.name());
  shm.set_size_bytes(region_.size());
  return handle;
}

ContextBufferReader::ContextBufferReader(int64_t expected_width) : width_(expected_width) {}

absl::Status ContextBufferReader::Accept(const v1::TensorHandle& handle) {
  if (handle.memory_case() != v1::TensorHandle::kPosixShm) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(handle), " is not in POSIX shared memory"));
  }
  absl::StatusOr<ContextLayout> layout = CheckContextHandle(handle, width_);
  if (!layout.ok()) return layout.status();
  absl::StatusOr<bool> mapped = accepted_.IsMapped(handle, *layout);
  if (!mapped.ok()) return mapped.status();
  if (!*mapped) {
    absl::StatusOr<SharedMemoryRegion> region =
        SharedMemoryRegion::OpenReadOnly(handle.posix_shm().name(), layout->region_bytes);
    if (!region.ok()) return region.status();
    region_ = *std::move(region);
  }
  accepted_.Record(handle, *layout);
  return absl::OkStatus();
}

const float* ContextBufferReader::Row(int64_t position) const {
  if (!region_.has_value() || position < 0 || position >= rows()) return nullptr;
  return reinterpret_cast<const float*>(region_->data() + accepted_.byte_offset() +
                                        position * width_ * kFloatBytes);
}

}  // namespace specd::rpc
