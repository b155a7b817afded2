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

// rows × width × 4 without overflow; 0 when it would not fit in an int64.
uint64_t TensorBytes(int64_t rows, int64_t width) {
  if (rows <= 0 || width <= 0) return 0;
  if (width > std::numeric_limits<int64_t>::max() / kFloatBytes / rows) return 0;
  return static_cast<uint64_t>(rows * width * kFloatBytes);
}

std::string Describe(const v1::TensorHandle& handle) {
  return absl::StrCat("context handle (owner ", handle.owner_instance_id(), ", buffer ",
                      handle.buffer_id(), ", generation ", handle.generation(), ")");
}

}  // namespace

absl::StatusOr<ContextBuffer> ContextBuffer::Create(std::string owner_instance_id,
                                                    uint64_t buffer_id, int64_t rows,
                                                    int64_t width) {
  if (rows < 1 || rows > kMaxRows || width < 1) {
    return absl::InvalidArgumentError(absl::StrCat("context buffer shape [", rows, ", ", width,
                                                   "] needs rows in [1, ", kMaxRows,
                                                   "] and width ≥ 1"));
  }
  const uint64_t bytes = TensorBytes(rows, width);
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("context buffer shape [", rows, ", ", width, "] overflows its byte size"));
  }
  absl::StatusOr<SharedMemoryRegion> region = SharedMemoryRegion::Create(bytes);
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
  if (begin < 0 || count < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("context rows [", begin, ", +", count, ") have a negative bound"));
  }
  if (begin > rows_ || count > rows_ - begin) {
    return absl::OutOfRangeError(absl::StrCat("context rows [", begin, ", ", begin + count,
                                              ") exceed the buffer's ", rows_, " rows"));
  }
  if (count == 0) return absl::OkStatus();
  if (data == nullptr) return absl::InvalidArgumentError("context rows to write are null");
  std::memcpy(region_.data() + begin * width_ * kFloatBytes, data,
              static_cast<size_t>(count * width_ * kFloatBytes));
  return absl::OkStatus();
}

v1::TensorHandle ContextBuffer::Publish(int64_t begin, int64_t end) {
  ++generation_;
  v1::TensorHandle handle;
  v1::PosixShmRegion& shm = *handle.mutable_posix_shm();
  shm.set_name(region_.name());
  shm.set_size_bytes(region_.size());
  handle.set_owner_instance_id(owner_instance_id_);
  handle.set_buffer_id(buffer_id_);
  handle.set_dtype(v1::DTYPE_FLOAT32);
  handle.add_shape(rows_);
  handle.add_shape(width_);
  handle.set_byte_offset(0);
  handle.set_byte_size(TensorBytes(rows_, width_));
  handle.mutable_token_range()->set_begin(static_cast<uint32_t>(begin));
  handle.mutable_token_range()->set_end(static_cast<uint32_t>(end));
  handle.set_generation(generation_);
  return handle;
}

ContextBufferReader::ContextBufferReader(int64_t expected_width) : width_(expected_width) {}

absl::Status ContextBufferReader::Accept(const v1::TensorHandle& handle) {
  if (handle.memory_case() != v1::TensorHandle::kPosixShm) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(handle), " is not in POSIX shared memory"));
  }
  if (handle.dtype() != v1::DTYPE_FLOAT32) {
    return absl::InvalidArgumentError(absl::StrCat(
        Describe(handle), " has dtype ", v1::Dtype_Name(handle.dtype()), ", not DTYPE_FLOAT32"));
  }
  if (handle.shape_size() != 2 || handle.shape(0) < 1 || handle.shape(0) > kMaxRows ||
      handle.shape(1) != width_) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(handle), " has shape [",
                                                   absl::StrJoin(handle.shape(), ", "),
                                                   "], not [rows ≥ 1, ", width_, "]"));
  }
  const int64_t rows = handle.shape(0);
  if (!handle.strides().empty() &&
      !(handle.strides_size() == 2 && handle.strides(0) == width_ && handle.strides(1) == 1)) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(handle), " has strides [",
                                                   absl::StrJoin(handle.strides(), ", "),
                                                   "], not contiguous rows"));
  }
  const v1::PosixShmRegion& shm = handle.posix_shm();
  const uint64_t expected_bytes = TensorBytes(rows, width_);
  if (expected_bytes == 0 || handle.byte_size() != expected_bytes ||
      handle.byte_offset() % kFloatBytes != 0 || handle.byte_offset() > shm.size_bytes() ||
      handle.byte_size() > shm.size_bytes() - handle.byte_offset()) {
    return absl::InvalidArgumentError(absl::StrCat(
        Describe(handle), ": byte_offset ", handle.byte_offset(), " and byte_size ",
        handle.byte_size(), " do not fit float32 [", rows, ", ", width_, "] (", expected_bytes,
        " bytes) in region ", shm.name(), " of ", shm.size_bytes(), " bytes"));
  }
  const v1::TokenRange& range = handle.token_range();
  if (range.begin() > range.end() || range.end() > rows) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(handle), " names rows [", range.begin(),
                                                   ", ", range.end(), ") outside [0, ", rows, "]"));
  }
  if (handle.generation() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(handle), " has generation 0, which only unchanging memory uses"));
  }

  const bool same_buffer = region_.has_value() &&
                           handle.owner_instance_id() == owner_instance_id_ &&
                           handle.buffer_id() == buffer_id_;
  if (same_buffer) {
    if (shm.name() != region_->name() || shm.size_bytes() != region_->size() || rows != rows_ ||
        handle.byte_offset() != byte_offset_) {
      return absl::InvalidArgumentError(
          absl::StrCat(Describe(handle), " names region ", shm.name(), " (", shm.size_bytes(),
                       " bytes) with ", rows, " rows, but this buffer was mapped from ",
                       region_->name(), " (", region_->size(), " bytes) with ", rows_, " rows"));
    }
    // Equal generations are a retry of the same call and read the same rows.
    if (handle.generation() < generation_) {
      return absl::AbortedError(absl::StrCat(Describe(handle), " is stale: generation ",
                                             generation_, " was already accepted"));
    }
  } else {
    absl::StatusOr<SharedMemoryRegion> region =
        SharedMemoryRegion::OpenReadOnly(shm.name(), shm.size_bytes());
    if (!region.ok()) return region.status();
    region_ = *std::move(region);
    owner_instance_id_ = handle.owner_instance_id();
    buffer_id_ = handle.buffer_id();
    byte_offset_ = handle.byte_offset();
    rows_ = rows;
  }
  generation_ = handle.generation();
  valid_begin_ = range.begin();
  valid_end_ = range.end();
  return absl::OkStatus();
}

const float* ContextBufferReader::Row(int64_t position) const {
  if (!region_.has_value() || position < 0 || position >= rows_) return nullptr;
  return reinterpret_cast<const float*>(region_->data() + byte_offset_ +
                                        position * width_ * kFloatBytes);
}

}  // namespace specd::rpc
