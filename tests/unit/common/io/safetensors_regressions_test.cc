// Replays tests/fuzz/regressions/safetensors/: inputs the fuzzer found and hand-made malformed
// files. Every one must parse or fail with a status; the named ones must fail for their reason.
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/io/safetensors_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"

namespace specd::io {
namespace {

using ::testing::HasSubstr;

std::filesystem::path RegressionsDir() {
  return specd::testing::SourceDir() / "tests" / "fuzz" / "regressions" / "safetensors";
}

std::vector<std::byte> ReadFile(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  const std::string content{std::istreambuf_iterator<char>(stream), {}};
  const auto* begin = reinterpret_cast<const std::byte*>(content.data());
  return std::vector<std::byte>(begin, begin + content.size());
}

absl::Status ParseRegression(const std::string& name) {
  return SafetensorsFile::Parse(ReadFile(RegressionsDir() / name), name).status();
}

struct MalformedCase {
  const char* file;
  const char* error;
};

constexpr MalformedCase kMalformedCases[] = {
    {"too_short.safetensors", "file is 5 bytes, shorter than the 8-byte header length"},
    {"truncated_header.safetensors", "exceeds the 22 bytes after the length field"},
    {"truncated_data.safetensors", "run past the 11-byte data section"},
    {"header_too_large.safetensors", "header length 1099511627776 exceeds the limit"},
    {"invalid_json.safetensors", "header is not valid JSON"},
    {"offsets_out_of_range.safetensors", "data_offsets [0, 8] run past the 4-byte data section"},
    {"overlapping.safetensors", R"(tensors "a" and "b" overlap)"},
    {"unknown_dtype.safetensors", R"(tensor "w": unknown dtype "F8_E4M3")"},
    {"shape_size_mismatch.safetensors", "shape [3] of F32 needs 12 bytes but data_offsets"},
    {"hole.safetensors", R"(data bytes [2, 4) belong to no tensor (a hole before "b"))"},
    {"trailing_bytes.safetensors", "data bytes [2, 6) belong to no tensor (trailing bytes"},
    {"duplicate_name.safetensors", R"(header repeats the key "a")"},
    {"negative_dimension.safetensors", "negative dimension -1 in shape"},
    {"shape_overflow.safetensors", "overflows 64 bits"},
    {"begin_after_end.safetensors", "data_offsets [4, 2] end before they begin"},
};

TEST(SafetensorsRegressionsTest, EveryFileParsesOrFailsWithAStatus) {
  int replayed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(RegressionsDir())) {
    const std::vector<std::byte> bytes = ReadFile(entry.path());
    absl::StatusOr<SafetensorsFile> file =
        SafetensorsFile::Parse(bytes, entry.path().filename().string());
    if (file.ok()) {
      for (const TensorView& tensor : file->tensors()) {
        EXPECT_GE(tensor.bytes.data(), bytes.data());
        EXPECT_LE(tensor.bytes.data() + tensor.bytes.size(), bytes.data() + bytes.size());
      }
    } else {
      EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << entry.path();
    }
    ++replayed;
  }
  EXPECT_GE(replayed, static_cast<int>(std::size(kMalformedCases)));
}

TEST(SafetensorsRegressionsTest, HandMadeMalformedFilesFailForTheirReason) {
  for (const MalformedCase& malformed : kMalformedCases) {
    const absl::Status status = ParseRegression(malformed.file);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << malformed.file;
    EXPECT_THAT(status.message(), HasSubstr(malformed.error)) << malformed.file;
  }
}

TEST(SafetensorsRegressionsTest, HandMadeValidFilesParse) {
  EXPECT_TRUE(ParseRegression("valid_two_tensors.safetensors").ok());
  EXPECT_TRUE(ParseRegression("valid_no_tensors.safetensors").ok());
}

}  // namespace
}  // namespace specd::io
