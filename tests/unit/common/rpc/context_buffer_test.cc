#include "common/rpc/context_buffer.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace specd::rpc {
namespace {

constexpr int64_t kRows = 8;
constexpr int64_t kWidth = 3;

// Rows whose values say where they belong: row p, column c holds 100 p + c.
std::vector<float> PositionRows(int64_t begin, int64_t count) {
  std::vector<float> rows;
  for (int64_t p = begin; p < begin + count; ++p) {
    for (int64_t c = 0; c < kWidth; ++c) rows.push_back(static_cast<float>(100 * p + c));
  }
  return rows;
}

ContextBuffer MakeBuffer(uint64_t buffer_id = 1, std::string owner = "verifier-a") {
  absl::StatusOr<ContextBuffer> buffer = ContextBuffer::Create(owner, buffer_id, kRows, kWidth);
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  return *std::move(buffer);
}

void ExpectRowHoldsPosition(const ContextBufferReader& reader, int64_t position) {
  const float* row = reader.Row(position);
  ASSERT_NE(row, nullptr) << "position " << position;
  for (int64_t c = 0; c < kWidth; ++c) {
    EXPECT_EQ(row[c], static_cast<float>(100 * position + c)) << "position " << position;
  }
}

TEST(ContextBuffer, CreateRejectsEmptyShapes) {
  EXPECT_EQ(ContextBuffer::Create("v", 1, 0, kWidth).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ContextBuffer::Create("v", 1, kRows, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ContextBuffer::Create("v", 1, int64_t{1} << 33, kWidth).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ContextBuffer, PublishDescribesTheWholeBufferAndTheValidRows) {
  ContextBuffer buffer = MakeBuffer(7);
  const v1::TensorHandle handle = buffer.Publish(2, 5);
  ASSERT_TRUE(handle.has_posix_shm());
  EXPECT_EQ(handle.posix_shm().name(), buffer.region().name());
  EXPECT_EQ(handle.posix_shm().size_bytes(), uint64_t{kRows * kWidth * 4});
  EXPECT_EQ(handle.owner_instance_id(), "verifier-a");
  EXPECT_EQ(handle.buffer_id(), 7u);
  EXPECT_EQ(handle.dtype(), v1::DTYPE_FLOAT32);
  ASSERT_EQ(handle.shape_size(), 2);
  EXPECT_EQ(handle.shape(0), kRows);
  EXPECT_EQ(handle.shape(1), kWidth);
  EXPECT_TRUE(handle.strides().empty());
  EXPECT_EQ(handle.byte_offset(), 0u);
  EXPECT_EQ(handle.byte_size(), uint64_t{kRows * kWidth * 4});
  EXPECT_EQ(handle.token_range().begin(), 2u);
  EXPECT_EQ(handle.token_range().end(), 5u);
  EXPECT_EQ(handle.generation(), 1u);
}

TEST(ContextBuffer, PublishCountsGenerationsFromOne) {
  ContextBuffer buffer = MakeBuffer();
  EXPECT_EQ(buffer.generation(), 0u);
  EXPECT_EQ(buffer.Publish(0, 1).generation(), 1u);
  EXPECT_EQ(buffer.Publish(1, 2).generation(), 2u);
  EXPECT_EQ(buffer.Publish(2, 3).generation(), 3u);
  EXPECT_EQ(buffer.generation(), 3u);
}

TEST(ContextBuffer, WriteRowsBeyondTheBufferIsOutOfRange) {
  ContextBuffer buffer = MakeBuffer();
  const std::vector<float> rows = PositionRows(kRows - 1, 2);
  EXPECT_EQ(buffer.WriteRows(kRows - 1, rows.data(), 2).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(buffer.WriteRows(kRows + 1, rows.data(), 0).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(buffer.WriteRows(-1, rows.data(), 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(buffer.WriteRows(kRows - 1, rows.data(), 1).ok());
}

TEST(ContextBufferReader, ReadsPublishedRowsThroughItsOwnMapping) {
  ContextBuffer buffer = MakeBuffer();
  const std::vector<float> prompt = PositionRows(0, 4);
  ASSERT_TRUE(buffer.WriteRows(0, prompt.data(), 4).ok());
  ContextBufferReader reader(kWidth);
  EXPECT_FALSE(reader.mapped());
  ASSERT_TRUE(reader.Accept(buffer.Publish(0, 4)).ok());
  EXPECT_TRUE(reader.mapped());
  EXPECT_EQ(reader.rows(), kRows);
  EXPECT_EQ(reader.width(), kWidth);
  EXPECT_EQ(reader.generation(), 1u);
  for (int64_t p = 0; p < 4; ++p) ExpectRowHoldsPosition(reader, p);

  // The next step's rows land in the mapping the reader already holds.
  const std::vector<float> step = PositionRows(4, 2);
  ASSERT_TRUE(buffer.WriteRows(4, step.data(), 2).ok());
  ASSERT_TRUE(reader.Accept(buffer.Publish(4, 6)).ok());
  EXPECT_EQ(reader.generation(), 2u);
  EXPECT_EQ(reader.valid_begin(), 4);
  EXPECT_EQ(reader.valid_end(), 6);
  for (int64_t p = 0; p < 6; ++p) ExpectRowHoldsPosition(reader, p);
}

TEST(ContextBufferReader, RowIsNullBeforeAcceptAndOutsideTheBuffer) {
  ContextBuffer buffer = MakeBuffer();
  ContextBufferReader reader(kWidth);
  EXPECT_EQ(reader.Row(0), nullptr);
  ASSERT_TRUE(reader.Accept(buffer.Publish(0, 1)).ok());
  EXPECT_NE(reader.Row(kRows - 1), nullptr);
  EXPECT_EQ(reader.Row(kRows), nullptr);
  EXPECT_EQ(reader.Row(-1), nullptr);
}

TEST(ContextBufferReader, StaleGenerationIsAbortedAndChangesNothing) {
  ContextBuffer buffer = MakeBuffer();
  const v1::TensorHandle first = buffer.Publish(0, 2);
  const v1::TensorHandle second = buffer.Publish(2, 3);
  ContextBufferReader reader(kWidth);
  ASSERT_TRUE(reader.Accept(second).ok());
  const absl::Status stale = reader.Accept(first);
  EXPECT_EQ(stale.code(), absl::StatusCode::kAborted) << stale;
  EXPECT_EQ(reader.generation(), 2u);
  EXPECT_EQ(reader.valid_begin(), 2);
}

TEST(ContextBufferReader, EqualGenerationIsAcceptedAsARetry) {
  ContextBuffer buffer = MakeBuffer();
  const v1::TensorHandle handle = buffer.Publish(0, 2);
  ContextBufferReader reader(kWidth);
  ASSERT_TRUE(reader.Accept(handle).ok());
  EXPECT_TRUE(reader.Accept(handle).ok());
  EXPECT_EQ(reader.generation(), 1u);
}

TEST(ContextBufferReader, NewBufferIdRemapsAndRestartsGenerations) {
  ContextBuffer old_buffer = MakeBuffer(1);
  for (int i = 0; i < 5; ++i) old_buffer.Publish(0, 1);
  ContextBuffer new_buffer = MakeBuffer(2);
  const std::vector<float> rows = PositionRows(0, 2);
  ASSERT_TRUE(new_buffer.WriteRows(0, rows.data(), 2).ok());

  ContextBufferReader reader(kWidth);
  ASSERT_TRUE(reader.Accept(old_buffer.Publish(0, 1)).ok());
  EXPECT_EQ(reader.generation(), 6u);
  const absl::Status status = reader.Accept(new_buffer.Publish(0, 2));
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(reader.generation(), 1u);
  ExpectRowHoldsPosition(reader, 0);
  ExpectRowHoldsPosition(reader, 1);
}

TEST(ContextBufferReader, NewOwnerInstanceRemapsEvenWithTheSameBufferId) {
  ContextBuffer before_restart = MakeBuffer(1, "verifier-a");
  before_restart.Publish(0, 1);
  ContextBuffer after_restart = MakeBuffer(1, "verifier-b");
  const std::vector<float> rows = PositionRows(0, 1);
  ASSERT_TRUE(after_restart.WriteRows(0, rows.data(), 1).ok());

  ContextBufferReader reader(kWidth);
  ASSERT_TRUE(reader.Accept(before_restart.Publish(0, 1)).ok());
  ASSERT_TRUE(reader.Accept(after_restart.Publish(0, 1)).ok());
  ExpectRowHoldsPosition(reader, 0);
}

TEST(ContextBufferReader, SameBufferIdInAnotherRegionIsInvalidArgument) {
  ContextBuffer buffer = MakeBuffer(1);
  ContextBuffer impostor = MakeBuffer(1);
  ContextBufferReader reader(kWidth);
  ASSERT_TRUE(reader.Accept(buffer.Publish(0, 1)).ok());
  impostor.Publish(0, 1);
  EXPECT_EQ(reader.Accept(impostor.Publish(0, 1)).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ContextBufferReader, HandleToAVanishedBufferIsNotFound) {
  v1::TensorHandle handle;
  {
    ContextBuffer buffer = MakeBuffer();
    handle = buffer.Publish(0, 1);
  }
  ContextBufferReader reader(kWidth);
  EXPECT_EQ(reader.Accept(handle).code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(reader.mapped());
}

struct MalformedHandle {
  std::string what;
  std::function<void(v1::TensorHandle&)> spoil;
};

TEST(ContextBufferReader, MalformedHandlesAreInvalidArgument) {
  const std::vector<MalformedHandle> cases = {
      {"cuda_ipc memory", [](v1::TensorHandle& h) { h.mutable_cuda_ipc(); }},
      {"no memory", [](v1::TensorHandle& h) { h.clear_memory(); }},
      {"bfloat16", [](v1::TensorHandle& h) { h.set_dtype(v1::DTYPE_BFLOAT16); }},
      {"unset dtype", [](v1::TensorHandle& h) { h.set_dtype(v1::DTYPE_UNSPECIFIED); }},
      {"wrong width", [](v1::TensorHandle& h) { h.set_shape(1, kWidth + 1); }},
      {"1-D shape", [](v1::TensorHandle& h) { h.mutable_shape()->RemoveLast(); }},
      {"3-D shape", [](v1::TensorHandle& h) { h.add_shape(1); }},
      {"zero rows", [](v1::TensorHandle& h) { h.set_shape(0, 0); }},
      {"transposed strides",
       [](v1::TensorHandle& h) {
         h.add_strides(1);
         h.add_strides(kRows);
       }},
      {"byte_size too small", [](v1::TensorHandle& h) { h.set_byte_size(h.byte_size() - 4); }},
      {"byte_size too large", [](v1::TensorHandle& h) { h.set_byte_size(h.byte_size() + 4); }},
      {"tensor beyond region", [](v1::TensorHandle& h) { h.set_byte_offset(4); }},
      {"misaligned offset",
       [](v1::TensorHandle& h) {
         h.mutable_posix_shm()->set_size_bytes(h.posix_shm().size_bytes() + 8);
         h.set_byte_offset(2);
       }},
      {"more rows than the region holds",
       [](v1::TensorHandle& h) {
         h.set_shape(0, kRows + 1);
         h.set_byte_size(h.byte_size() + kWidth * 4);
       }},
      {"range end beyond rows",
       [](v1::TensorHandle& h) { h.mutable_token_range()->set_end(kRows + 1); }},
      {"range begin after end",
       [](v1::TensorHandle& h) {
         h.mutable_token_range()->set_begin(3);
         h.mutable_token_range()->set_end(2);
       }},
      {"generation 0", [](v1::TensorHandle& h) { h.set_generation(0); }},
  };
  ContextBuffer buffer = MakeBuffer();
  const v1::TensorHandle valid = buffer.Publish(0, 4);
  for (const MalformedHandle& malformed : cases) {
    v1::TensorHandle handle = valid;
    malformed.spoil(handle);
    ContextBufferReader reader(kWidth);
    const absl::Status status = reader.Accept(handle);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
        << malformed.what << ": " << status;
    EXPECT_FALSE(reader.mapped()) << malformed.what;
  }
  ContextBufferReader reader(kWidth);
  EXPECT_TRUE(reader.Accept(valid).ok());
}

TEST(ContextBufferReader, ReadsRowsAnotherProcessWrote) {
  int handle_pipe[2];
  int done_pipe[2];
  ASSERT_EQ(pipe(handle_pipe), 0);
  ASSERT_EQ(pipe(done_pipe), 0);
  const pid_t owner_pid = fork();
  ASSERT_GE(owner_pid, 0);
  if (owner_pid == 0) {
    // The owner: writes the prompt's rows, sends the handle, keeps the buffer until told to stop.
    int exit_code = 1;
    {
      absl::StatusOr<ContextBuffer> buffer = ContextBuffer::Create("verifier", 1, kRows, kWidth);
      const std::vector<float> rows = PositionRows(0, 5);
      if (buffer.ok() && buffer->WriteRows(0, rows.data(), 5).ok()) {
        const std::string bytes = buffer->Publish(0, 5).SerializeAsString();
        const uint32_t length = bytes.size();
        char done;
        if (write(handle_pipe[1], &length, sizeof(length)) == sizeof(length) &&
            write(handle_pipe[1], bytes.data(), length) == static_cast<ssize_t>(length) &&
            read(done_pipe[0], &done, 1) == 1) {
          exit_code = 0;
        }
      }
    }  // unlinks the buffer
    _exit(exit_code);
  }
  uint32_t length = 0;
  ASSERT_EQ(read(handle_pipe[0], &length, sizeof(length)), static_cast<ssize_t>(sizeof(length)));
  std::string bytes(length, '\0');
  ASSERT_EQ(read(handle_pipe[0], bytes.data(), length), static_cast<ssize_t>(length));
  v1::TensorHandle handle;
  ASSERT_TRUE(handle.ParseFromString(bytes));
  EXPECT_EQ(handle.posix_shm().name().rfind("/specd." + std::to_string(owner_pid) + ".", 0), 0u);

  ContextBufferReader reader(kWidth);
  const absl::Status accepted = reader.Accept(handle);
  EXPECT_TRUE(accepted.ok()) << accepted;
  for (int64_t p = 0; accepted.ok() && p < 5; ++p) ExpectRowHoldsPosition(reader, p);

  ASSERT_EQ(write(done_pipe[1], "x", 1), 1);
  int wait_status = 0;
  ASSERT_EQ(waitpid(owner_pid, &wait_status, 0), owner_pid);
  EXPECT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0);
  EXPECT_FALSE(std::filesystem::exists("/dev/shm" + handle.posix_shm().name()));
  for (int fd : {handle_pipe[0], handle_pipe[1], done_pipe[0], done_pipe[1]}) close(fd);
}

}  // namespace
}  // namespace specd::rpc
