#pragma once
// Per-session buffers of token rows (the verifier's context features) in shared memory: the owner
// writes rows and publishes TensorHandles naming the valid ones; a consumer maps the buffer once
// and checks every handle it receives against what it already accepted. The checks and the
// handle's fields are shared with the device-memory buffers (device_context_buffer.h).
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/rpc/shared_memory_region.h"
#include "specd/v1/types.pb.h"

namespace specd::rpc {

// What a context handle states about its tensor, once CheckContextHandle has checked it.
struct ContextLayout {
  int64_t rows = 0;
  int64_t element_bytes = 0;
  // The region's identity (the shm name, or the CUDA IPC memory handle's bytes) and size.
  std::string region;
  uint64_t region_bytes = 0;
};

// The checks every context handle passes whatever its memory, as ContextBufferReader::Accept
// documents them: a dtype its memory carries (float32 rows in POSIX shared memory; float32 or
// bf16, the model's dtype, in CUDA IPC device memory), shape [rows ≥ 1, width], contiguous
// strides, byte_offset and byte_size inside the region, token_range within the rows,
// generation ≥ 1. INVALID_ARGUMENT otherwise, or for a handle without memory.
absl::StatusOr<ContextLayout> CheckContextHandle(const v1::TensorHandle& handle, int64_t width);

// The bytes of an element of context rows of `dtype` (2 for DTYPE_BFLOAT16, else float32's 4).
int64_t ContextElementBytes(v1::Dtype dtype);

// The bytes of a [rows, width] buffer of `element_bytes` elements; INVALID_ARGUMENT unless rows is
// in [1, 2^32 - 1] (token positions are uint32 in the contract), width ≥ 1 and the size fits.
absl::StatusOr<uint64_t> ContextBufferBytes(int64_t rows, int64_t width, int64_t element_bytes);

// OK when `count` rows from `data` fit positions [begin, begin + count) of a buffer of `rows`:
// OUT_OF_RANGE beyond them, INVALID_ARGUMENT for a negative begin or count, or null data with
// rows to write.
absl::Status CheckRowsToWrite(int64_t begin, int64_t count, int64_t rows, const void* data);

// The handle naming rows [begin, end) of a whole-buffer [rows, width] tensor at generation
// `generation`, without its memory (the owner sets posix_shm or cuda_ipc).
v1::TensorHandle ContextHandle(const std::string& owner_instance_id, uint64_t buffer_id,
                               v1::Dtype dtype, int64_t rows, int64_t width, int64_t begin,
                               int64_t end, uint64_t generation);

// A consumer's record of the buffer it has mapped and the newest generation it accepted, which
// every handle is checked against (both readers, whatever the memory).
class AcceptedContext {
 public:
  // Whether checked `handle` names the buffer already mapped (same owner_instance_id and
  // buffer_id); INVALID_ARGUMENT when it does with another region, size, shape or offset,
  // ABORTED when its generation is older than one accepted (an equal one is a harmless retry).
  absl::StatusOr<bool> IsMapped(const v1::TensorHandle& handle, const ContextLayout& layout) const;
  // Records `handle` as accepted, its buffer now the mapped one.
  void Record(const v1::TensorHandle& handle, const ContextLayout& layout);

  bool mapped() const { return mapped_; }
  int64_t rows() const { return layout_.rows; }
  uint64_t byte_offset() const { return byte_offset_; }
  uint64_t generation() const { return generation_; }
  int64_t valid_begin() const { return valid_begin_; }
  int64_t valid_end() const { return valid_end_; }

 private:
  bool mapped_ = false;
  std::string owner_instance_id_;
  uint64_t buffer_id_ = 0;
  ContextLayout layout_;
  uint64_t byte_offset_ = 0;
  uint64_t generation_ = 0;
  int64_t valid_begin_ = 0;
  int64_t valid_end_ = 0;
};

// Owner side: [rows, width] float32 rows in a fresh SharedMemoryRegion; row p holds absolute
// position p (rows is the session's maximum length).
class ContextBuffer {
 public:
  // rows in [1, 2^32 - 1] (token positions are uint32 in the contract), width ≥ 1.
  static absl::StatusOr<ContextBuffer> Create(std::string owner_instance_id, uint64_t buffer_id,
                                              int64_t rows, int64_t width);

  // Copies `count` rows (count × width floats, row-major) to positions [begin, begin + count);
  // OUT_OF_RANGE beyond rows, INVALID_ARGUMENT for a negative begin or count.
  absl::Status WriteRows(int64_t begin, const float* data, int64_t count);
  // Increments the generation (0 before the first call, so the first Publish returns generation
  // 1) and returns the handle naming rows [begin, end) as valid: posix_shm {name, size},
  // owner_instance_id, buffer_id, dtype FLOAT32, shape [rows, width], byte_offset 0, byte_size
  // rows × width × 4, token_range, generation. Requires 0 ≤ begin ≤ end ≤ rows; a handle outside
  // that is what ContextBufferReader rejects with INVALID_ARGUMENT.
  v1::TensorHandle Publish(int64_t begin, int64_t end);

  uint64_t generation() const { return generation_; }
  int64_t rows() const { return rows_; }
  int64_t width() const { return width_; }
  const std::string& owner_instance_id() const { return owner_instance_id_; }
  uint64_t buffer_id() const { return buffer_id_; }
  const SharedMemoryRegion& region() const { return region_; }

 private:
  ContextBuffer(SharedMemoryRegion region, std::string owner_instance_id, uint64_t buffer_id,
                int64_t rows, int64_t width);

  SharedMemoryRegion region_;
  std::string owner_instance_id_;
  uint64_t buffer_id_;
  int64_t rows_;
  int64_t width_;
  uint64_t generation_ = 0;
};

// Consumer side, one per session: maps the buffer a handle names (re-mapping only when
// owner_instance_id or buffer_id changes) and checks each handle before its rows are read.
class ContextBufferReader {
 public:
  explicit ContextBufferReader(int64_t expected_width);

  // Validates `handle` and maps its buffer if it is not the one already mapped. On any error the
  // reader keeps its previous mapping and generation.
  // INVALID_ARGUMENT: not posix_shm; dtype not FLOAT32; shape not 2-D, rows < 1 or width !=
  // expected_width; strides neither empty nor [width, 1]; byte_offset not a multiple of 4,
  // byte_size != rows × width × 4, or byte_offset + byte_size beyond the region's size_bytes;
  // token_range begin > end or end > rows; generation 0; or the same (owner_instance_id,
  // buffer_id) as the mapped buffer but another shm name, size or shape.
  // ABORTED: generation strictly older than one already accepted for the same buffer (an equal
  // generation is a harmless retry and is accepted).
  // NOT_FOUND / INVALID_ARGUMENT from SharedMemoryRegion::OpenReadOnly when mapping fails.
  absl::Status Accept(const v1::TensorHandle& handle);

  // Row of absolute `position` (width floats), after a successful Accept; nullptr when nothing
  // is mapped or position is outside [0, rows). Rows outside the last accepted token_range hold
  // whatever the owner wrote there, if anything.
  const float* Row(int64_t position) const;

  int64_t rows() const { return accepted_.rows(); }
  int64_t width() const { return width_; }
  // Generation of the last accepted handle; 0 before the first.
  uint64_t generation() const { return accepted_.generation(); }
  bool mapped() const { return region_.has_value(); }
  // The last accepted handle's valid rows [begin, end).
  int64_t valid_begin() const { return accepted_.valid_begin(); }
  int64_t valid_end() const { return accepted_.valid_end(); }

 private:
  int64_t width_;
  std::optional<SharedMemoryRegion> region_;
  AcceptedContext accepted_;
};

}  // namespace specd::rpc
