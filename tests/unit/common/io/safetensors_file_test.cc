#include "common/io/safetensors_file.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"

namespace specd::io {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A safetensors file: the 8-byte little-endian header length, `header`, then `data_size` bytes
// counting up from 0 so that each view can be checked to land on the right bytes.
std::vector<std::byte> FileBytes(const std::string& header, size_t data_size) {
  std::vector<std::byte> bytes(8 + header.size() + data_size);
  const uint64_t header_size = header.size();
  std::memcpy(bytes.data(), &header_size, 8);
  std::memcpy(bytes.data() + 8, header.data(), header.size());
  for (size_t i = 0; i < data_size; ++i) bytes[8 + header.size() + i] = std::byte(i);
  return bytes;
}

absl::Status ParseStatus(const std::string& header, size_t data_size) {
  return SafetensorsFile::Parse(FileBytes(header, data_size), "test.safetensors").status();
}

TEST(SafetensorsFileTest, ViewsPointIntoTheFileBytesInDataOrder) {
  // The header lists "b" first, but its bytes come second.
  const std::vector<std::byte> bytes = FileBytes(
      R"({"b": {"dtype": "I16", "shape": [3], "data_offsets": [8, 14]},
          "a": {"dtype": "F32", "shape": [2, 1], "data_offsets": [0, 8]},
          "__metadata__": {"format": "pt"}})",
      14);
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Parse(bytes, "test.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();

  ASSERT_EQ(file->tensors().size(), 2u);
  const TensorView& a = file->tensors()[0];
  const TensorView& b = file->tensors()[1];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.dtype, DType::kF32);
  EXPECT_THAT(a.shape, ElementsAre(2, 1));
  EXPECT_EQ(a.NumElements(), 2);
  EXPECT_EQ(a.bytes.data(), bytes.data() + bytes.size() - 14);  // zero-copy
  EXPECT_EQ(a.bytes.size(), 8u);
  EXPECT_EQ(b.name, "b");
  EXPECT_EQ(b.dtype, DType::kI16);
  EXPECT_EQ(b.bytes.data(), a.bytes.data() + 8);
  EXPECT_EQ(b.bytes.size(), 6u);
  EXPECT_EQ(b.owner, nullptr);  // the caller owns parsed bytes

  EXPECT_EQ(file->Find("b"), &b);
  EXPECT_EQ(file->Find("c"), nullptr);
  EXPECT_THAT(file->metadata(),
              ElementsAre(std::pair<const std::string, std::string>("format", "pt")));
}

TEST(SafetensorsFileTest, AcceptsScalarsEmptyTensorsAndAnEmptyFile) {
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Parse(
      FileBytes(R"({"scalar": {"dtype": "F64", "shape": [], "data_offsets": [0, 8]},
                    "empty": {"dtype": "BF16", "shape": [4, 0], "data_offsets": [8, 8]}})",
                8),
      "test.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->Find("scalar")->NumElements(), 1);
  EXPECT_EQ(file->Find("empty")->NumElements(), 0);
  EXPECT_TRUE(file->Find("empty")->bytes.empty());

  absl::StatusOr<SafetensorsFile> no_tensors = SafetensorsFile::Parse(FileBytes("{}", 0), "e");
  ASSERT_TRUE(no_tensors.ok()) << no_tensors.status();
  EXPECT_TRUE(no_tensors->tensors().empty());
}

TEST(SafetensorsFileTest, ReadsEveryDTypeName) {
  for (DType dtype : kAllDTypes) {
    const size_t size = DTypeSize(dtype);
    const std::string header = std::string(R"({"t": {"dtype": ")") + DTypeName(dtype) +
                               R"(", "shape": [2], "data_offsets": [0, )" +
                               std::to_string(2 * size) + "]}}";
    absl::StatusOr<SafetensorsFile> file =
        SafetensorsFile::Parse(FileBytes(header, 2 * size), "test.safetensors");
    ASSERT_TRUE(file.ok()) << DTypeName(dtype) << ": " << file.status();
    EXPECT_EQ(file->tensors()[0].dtype, dtype);
  }
}

TEST(SafetensorsFileTest, RejectsAFileShorterThanTheHeaderLength) {
  const std::vector<std::byte> bytes(5);
  EXPECT_THAT(SafetensorsFile::Parse(bytes, "short.safetensors").status().message(),
              HasSubstr("short.safetensors: file is 5 bytes, shorter than the 8-byte header"));
}

TEST(SafetensorsFileTest, RejectsAHeaderLengthBeyondTheFileOrTheCap) {
  std::vector<std::byte> bytes = FileBytes("{}", 0);
  bytes[0] = std::byte{3};  // claims 3 bytes, the file has 2 after the length
  EXPECT_THAT(SafetensorsFile::Parse(bytes, "f").status().message(),
              HasSubstr("header length 3 exceeds the 2 bytes after the length field"));

  const uint64_t huge = kMaxSafetensorsHeaderBytes + 1;
  std::memcpy(bytes.data(), &huge, 8);
  EXPECT_THAT(SafetensorsFile::Parse(bytes, "f").status().message(),
              HasSubstr("header length 100000001 exceeds the limit of 100000000 bytes"));
}

TEST(SafetensorsFileTest, RejectsMalformedJson) {
  EXPECT_THAT(ParseStatus(R"({"a": )", 0).message(), HasSubstr("header is not valid JSON"));
  EXPECT_THAT(ParseStatus("[1, 2]", 0).message(), HasSubstr("header is not a JSON object"));
  EXPECT_THAT(ParseStatus(R"({"a": [[[1]]]})", 0).message(),
              HasSubstr("nests JSON containers deeper than 3 levels"));
}

TEST(SafetensorsFileTest, RejectsEntriesOfTheWrongShape) {
  EXPECT_THAT(ParseStatus(R"({"a": 5})", 0).message(),
              HasSubstr(R"(tensor "a": entry is not a JSON object)"));
  EXPECT_THAT(
      ParseStatus(R"({"a": {"dtype": 1, "shape": [], "data_offsets": [0, 0]}})", 0).message(),
      HasSubstr(R"(tensor "a": "dtype" is missing or not a string)"));
  EXPECT_THAT(ParseStatus(R"({"a": {"dtype": "U8", "data_offsets": [0, 0]}})", 0).message(),
              HasSubstr(R"("shape" is missing or not a list)"));
  EXPECT_THAT(
      ParseStatus(R"({"a": {"dtype": "U8", "shape": [], "data_offsets": [0]}})", 0).message(),
      HasSubstr(R"("data_offsets" is missing or not a list of two)"));
  EXPECT_THAT(
      ParseStatus(R"({"a": {"dtype": "U8", "shape": [1.5], "data_offsets": [0, 1]}})", 1).message(),
      HasSubstr("shape holds 1.5, not a dimension"));
  EXPECT_THAT(
      ParseStatus(R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [-1, 0]}})", 1).message(),
      HasSubstr("data_offsets holds -1, not a byte offset"));
  EXPECT_THAT(ParseStatus(R"({"__metadata__": {"step": 3}})", 0).message(),
              HasSubstr(R"(__metadata__ value of "step" is not a string)"));
}

TEST(SafetensorsFileTest, RejectsAnUnknownDTypeNamingTheTensor) {
  EXPECT_THAT(ParseStatus(R"({"w": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}})", 1)
                  .message(),
              HasSubstr(R"(tensor "w": unknown dtype "F8_E4M3")"));
}

TEST(SafetensorsFileTest, RejectsShapesThatDoNotMatchTheBytes) {
  EXPECT_THAT(
      ParseStatus(R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})", 20)
          .message(),
      HasSubstr(R"(tensor "w": shape [2, 3] of F32 needs 24 bytes but data_offsets )"
                R"([0, 20] hold 20)"));
  EXPECT_THAT(ParseStatus(R"({"w": {"dtype": "U8", "shape": [4, -1], "data_offsets": [0, 0]}})", 0)
                  .message(),
              HasSubstr("negative dimension -1 in shape"));
  EXPECT_THAT(ParseStatus(R"({"w": {"dtype": "I64", "shape": [4294967296, 4294967296],
                                    "data_offsets": [0, 0]}})",
                          0)
                  .message(),
              HasSubstr("shape [4294967296, 4294967296] of I64 overflows 64 bits"));
}

TEST(SafetensorsFileTest, RejectsOffsetsThatDoNotTileTheDataSection) {
  EXPECT_THAT(
      ParseStatus(R"({"w": {"dtype": "U8", "shape": [0], "data_offsets": [3, 2]}})", 3).message(),
      HasSubstr("data_offsets [3, 2] end before they begin"));
  EXPECT_THAT(
      ParseStatus(R"({"w": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}})", 3).message(),
      HasSubstr(R"(tensor "w": data_offsets [0, 4] run past the 3-byte data section)"));
  EXPECT_THAT(ParseStatus(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                              "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}})",
                          6)
                  .message(),
              HasSubstr(R"(tensors "a" and "b" overlap)"));
  EXPECT_THAT(ParseStatus(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                              "b": {"dtype": "U8", "shape": [2], "data_offsets": [4, 6]}})",
                          6)
                  .message(),
              HasSubstr(R"(data bytes [2, 4) belong to no tensor (a hole before "b"))"));
  EXPECT_THAT(
      ParseStatus(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}})", 5).message(),
      HasSubstr("data bytes [2, 5) belong to no tensor (trailing bytes"));
}

TEST(SafetensorsFileTest, RejectsRepeatedNamesAndFields) {
  EXPECT_THAT(ParseStatus(R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                              "a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                          2)
                  .message(),
              HasSubstr(R"(header repeats the key "a")"));
  EXPECT_THAT(ParseStatus(R"({"a": {"dtype": "U8", "dtype": "I8", "shape": [1],
                                    "data_offsets": [0, 1]}})",
                          1)
                  .message(),
              HasSubstr(R"(header repeats the key "dtype")"));
}

TEST(SafetensorsFileTest, OpenMapsAFileAndViewsKeepTheMappingAlive) {
  const std::filesystem::path path =
      specd::testing::SharedDir() / "fixtures" / "qwen35-tiny-a" / "model.safetensors";
  TensorView embedding;
  {
    absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    embedding = *file->Find("model.embed_tokens.weight");
  }
  ASSERT_NE(embedding.owner, nullptr);
  float first = 0;
  std::memcpy(&first, embedding.bytes.data(), sizeof(first));  // still mapped
  EXPECT_TRUE(std::isfinite(first));
}

TEST(SafetensorsFileTest, OpenReportsAMissingFile) {
  const absl::Status status = SafetensorsFile::Open("/nonexistent/model.safetensors").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("/nonexistent/model.safetensors"));
}

}  // namespace
}  // namespace specd::io
