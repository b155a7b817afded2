#pragma once
// Per-session buffers of token rows (the verifier's context features) in shared memory: the owner
// writes rows and publishes TensorHandles naming the valid ones; a consumer maps the buffer once
// and checks every handle it receives against what it already accepted.
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/rpc/shared_memory_region.h"
#include "specd/v1/types.pb.h"

namespace specd::rpc {

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

  int64_t rows() const { return rows_; }
  int64_t width() const { return width_; }
  // Generation of the last accepted handle; 0 before the first.
  uint64_t generation() const { return generation_; }
  bool mapped() const { return region_.has_value(); }
  // The last accepted handle's valid rows [begin, end).
  int64_t valid_begin() const { return valid_begin_; }
  int64_t valid_end() const { return valid_end_; }

 private:
  int64_t width_;
  std::optional<SharedMemoryRegion> region_;
  std::string owner_instance_id_;
  uint64_t buffer_id_ = 0;
  uint64_t byte_offset_ = 0;
  int64_t rows_ = 0;
  uint64_t generation_ = 0;
  int64_t valid_begin_ = 0;
  int64_t valid_end_ = 0;
};

}  // namespace specd::rpc
