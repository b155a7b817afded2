#include "common/io/safetensors_writer.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "common/io/safetensors_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace specd::io {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::vector<std::byte> CountingBytes(size_t size, int start) {
  std::vector<std::byte> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = std::byte(start + i);
  return bytes;
}

std::vector<std::byte> ReadFile(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  const std::string content{std::istreambuf_iterator<char>(stream), {}};
  const auto* begin = reinterpret_cast<const std::byte*>(content.data());
  return std::vector<std::byte>(begin, begin + content.size());
}

// A tensor to write: the caller owns its bytes.
TensorView View(std::string name, DType dtype, std::vector<int64_t> shape,
                std::span<const std::byte> bytes) {
  return {.name = std::move(name),
          .dtype = dtype,
          .shape = std::move(shape),
          .bytes = bytes,
          .owner = nullptr};
}

std::vector<std::byte> BytesOf(const TensorView& tensor) {
  return std::vector<std::byte>(tensor.bytes.begin(), tensor.bytes.end());
}

TEST(SafetensorsWriterTest, RoundTripsEveryDType) {
  testing::TempDir dir;
  std::vector<std::vector<std::byte>> storage;
  std::vector<TensorView> tensors;
  for (DType dtype : kAllDTypes) {
    storage.push_back(CountingBytes(DTypeSize(dtype) * 6, static_cast<int>(storage.size())));
    tensors.push_back(View(DTypeName(dtype), dtype, {2, 3}, storage.back()));
  }
  const std::filesystem::path path = dir.path() / "all.safetensors";
  ASSERT_TRUE(WriteSafetensorsFile(path, tensors, {{"format", "pt"}}).ok());

  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->tensors().size(), tensors.size());
  EXPECT_THAT(file->metadata(),
              ElementsAre(std::pair<const std::string, std::string>("format", "pt")));
  for (const TensorView& written : tensors) {
    const TensorView* read = file->Find(written.name);
    ASSERT_NE(read, nullptr) << written.name;
    EXPECT_EQ(read->dtype, written.dtype);
    EXPECT_THAT(read->shape, ElementsAre(2, 3));
    EXPECT_THAT(BytesOf(*read), ElementsAreArray(BytesOf(written))) << written.name;
  }
}

TEST(SafetensorsWriterTest, PadsTheHeaderWithSpacesAndAlignsEveryTensor) {
  testing::TempDir dir;
  const std::vector<std::byte> one_byte = CountingBytes(3, 0);
  const std::vector<std::byte> eight_bytes = CountingBytes(16, 0);
  const std::vector<std::byte> four_bytes = CountingBytes(4, 0);
  const std::vector<TensorView> tensors = {View("u8", DType::kU8, {3}, one_byte),
                                           View("i64", DType::kI64, {2}, eight_bytes),
                                           View("f32", DType::kF32, {1}, four_bytes)};
  const std::filesystem::path path = dir.path() / "aligned.safetensors";
  ASSERT_TRUE(WriteSafetensorsFile(path, tensors).ok());

  const std::vector<std::byte> bytes = ReadFile(path);
  uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  EXPECT_EQ(header_size % 8, 0u);
  EXPECT_EQ(bytes[8 + header_size - 1], std::byte{' '});

  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  std::vector<std::string> order;
  for (const TensorView& tensor : file->tensors()) {
    order.push_back(tensor.name);
    const auto offset = static_cast<size_t>(tensor.bytes.data() - file->tensors()[0].bytes.data());
    EXPECT_EQ(offset % DTypeSize(tensor.dtype), 0u) << tensor.name;
  }
  EXPECT_THAT(order, ElementsAre("i64", "f32", "u8"));  // larger elements first
}

TEST(SafetensorsWriterTest, ReplacesAnExistingFileAndLeavesNoTemporaryFile) {
  testing::TempDir dir;
  const std::filesystem::path path = dir.path() / "model.safetensors";
  const std::vector<std::byte> old_bytes = CountingBytes(2, 0);
  const std::vector<std::byte> new_bytes = CountingBytes(4, 7);
  ASSERT_TRUE(
      WriteSafetensorsFile(path, std::vector{View("old", DType::kU8, {2}, old_bytes)}).ok());
  ASSERT_TRUE(
      WriteSafetensorsFile(path, std::vector{View("new", DType::kI16, {2}, new_bytes)}).ok());

  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->tensors().size(), 1u);
  EXPECT_EQ(file->tensors()[0].name, "new");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

TEST(SafetensorsWriterTest, RefusesBadTensorsWithoutTouchingTheFile) {
  testing::TempDir dir;
  const std::filesystem::path path = dir.path() / "bad.safetensors";
  const std::vector<std::byte> bytes = CountingBytes(4, 0);
  const TensorView good = View("w", DType::kF32, {1}, bytes);

  TensorView wrong_size = good;
  wrong_size.shape = {2};
  EXPECT_THAT(WriteSafetensorsFile(path, std::vector{wrong_size}).message(),
              HasSubstr(R"(tensor "w": 4 bytes do not hold a F32 tensor of shape [2])"));
  EXPECT_THAT(WriteSafetensorsFile(path, std::vector{good, good}).message(),
              HasSubstr(R"(tensor "w": the name is repeated)"));
  TensorView reserved = good;
  reserved.name = "__metadata__";
  EXPECT_THAT(WriteSafetensorsFile(path, std::vector{reserved}).message(),
              HasSubstr("the name is reserved"));
  TensorView not_utf8 = good;
  not_utf8.name = "\xff";
  EXPECT_THAT(WriteSafetensorsFile(path, std::vector{not_utf8}).message(), HasSubstr("UTF-8"));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace specd::io
