#include "common/io/checkpoint.h"

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/io/checkpoint_writer.h"
#include "common/io/json_file.h"
#include "common/io/safetensors_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"
#include "tests/support/temp_dir.h"

namespace specd::io {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

// Five 16-byte F32 tensors t0..t4 whose bytes all differ.
class CheckpointTest : public ::testing::Test {
 protected:
  CheckpointTest() {
    for (int i = 0; i < 5; ++i) {
      storage_.emplace_back(16, std::byte(i));
      tensors_.push_back({.name = absl::StrCat("t", i),
                          .dtype = DType::kF32,
                          .shape = {2, 2},
                          .bytes = storage_.back(),
                          .owner = nullptr});
    }
  }

  std::vector<std::string> FileNames() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
      names.push_back(entry.path().filename().string());
    }
    return names;
  }

  void WriteText(const std::string& name, const std::string& text) const {
    std::ofstream(dir_.path() / name) << text;
  }

  testing::TempDir dir_;
  std::vector<std::vector<std::byte>> storage_;
  std::vector<TensorView> tensors_;
};

TEST_F(CheckpointTest, WritesShardsWithTheHuggingFaceNamesAndIndex) {
  // 16-byte tensors, at most 40 bytes a shard: [t0 t1] [t2 t3] [t4].
  ASSERT_TRUE(WriteCheckpointTensors(dir_.path(), tensors_, 40, {{"format", "pt"}}).ok());

  EXPECT_THAT(
      FileNames(),
      UnorderedElementsAre("model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                           "model-00003-of-00003.safetensors", "model.safetensors.index.json"));
  absl::StatusOr<nlohmann::json> index = ReadJsonFile(dir_.path() / kShardIndexFileName);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ((*index)["metadata"]["total_size"], 80);
  EXPECT_EQ((*index)["weight_map"]["t1"], "model-00001-of-00003.safetensors");
  EXPECT_EQ((*index)["weight_map"]["t2"], "model-00002-of-00003.safetensors");
  EXPECT_EQ((*index)["weight_map"]["t4"], "model-00003-of-00003.safetensors");
}

TEST_F(CheckpointTest, ReadsShardsAsOneSetOfTensors) {
  ASSERT_TRUE(WriteCheckpointTensors(dir_.path(), tensors_, 40).ok());

  absl::StatusOr<Checkpoint> checkpoint = Checkpoint::Open(dir_.path());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(checkpoint->shard_paths().size(), 3u);
  std::vector<std::string> names;
  for (const TensorView& tensor : checkpoint->tensors()) names.push_back(tensor.name);
  EXPECT_THAT(names, ElementsAre("t0", "t1", "t2", "t3", "t4"));
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<const TensorView*> tensor = checkpoint->Get(absl::StrCat("t", i));
    ASSERT_TRUE(tensor.ok()) << tensor.status();
    EXPECT_EQ((*tensor)->bytes[0], std::byte(i));
  }
  const absl::Status missing = checkpoint->Get("t9").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr(R"(has no tensor "t9")"));
}

// Resident file pages of this process, in KiB (/proc/self/status).
int64_t ResidentFileKiB() {
  std::ifstream status("/proc/self/status");
  for (std::string key; status >> key;) {
    if (key == "RssFile:") {
      int64_t kib = 0;
      status >> kib;
      return kib;
    }
  }
  return -1;
}

TEST_F(CheckpointTest, ReleasedPagesLeaveResidentMemoryAndReadBackTheSame) {
  std::vector<std::byte> big(8 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = std::byte(i * 7 % 251);
  const TensorView tensor{
      .name = "big", .dtype = DType::kU8, .shape = {8 << 20}, .bytes = big, .owner = nullptr};
  ASSERT_TRUE(WriteCheckpointTensors(dir_.path(), std::span(&tensor, 1), uint64_t{1} << 30).ok());
  absl::StatusOr<Checkpoint> checkpoint = Checkpoint::Open(dir_.path());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  const TensorView& mapped = checkpoint->tensors()[0];

  ASSERT_TRUE(std::equal(mapped.bytes.begin(), mapped.bytes.end(), big.begin()));  // touched
  const int64_t touched = ResidentFileKiB();
  checkpoint->ReleaseResidentPages(mapped);
  EXPECT_LT(ResidentFileKiB(), touched - 7 * 1024);  // all but a partial page at either end
  EXPECT_TRUE(std::equal(mapped.bytes.begin(), mapped.bytes.end(), big.begin()));
}

TEST_F(CheckpointTest, WritesOneShardAsModelSafetensorsAndRemovesAStaleIndex) {
  ASSERT_TRUE(WriteCheckpointTensors(dir_.path(), tensors_, 40).ok());
  ASSERT_TRUE(WriteCheckpointTensors(dir_.path(), tensors_, 1 << 20).ok());

  EXPECT_THAT(FileNames(), ElementsAre("model.safetensors"));
  absl::StatusOr<Checkpoint> checkpoint = Checkpoint::Open(dir_.path());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(checkpoint->tensors().size(), 5u);
  EXPECT_EQ(checkpoint->shard_paths().size(), 1u);
}

TEST_F(CheckpointTest, GivesATensorLargerThanTheShardLimitAShardOfItsOwn) {
  ASSERT_TRUE(WriteCheckpointTensors(dir_.path(), tensors_, 10).ok());
  absl::StatusOr<Checkpoint> checkpoint = Checkpoint::Open(dir_.path());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(checkpoint->shard_paths().size(), 5u);
}

TEST_F(CheckpointTest, RefusesARepeatedNameAcrossShardsBeforeWritingAnything) {
  tensors_[4].name = "t0";
  EXPECT_THAT(WriteCheckpointTensors(dir_.path(), tensors_, 40).message(),
              HasSubstr(R"(tensor "t0": the name is repeated)"));
  EXPECT_TRUE(FileNames().empty());
}

TEST_F(CheckpointTest, ReshardsAFixtureWithoutChangingATensor) {
  absl::StatusOr<Checkpoint> original =
      Checkpoint::Open(specd::testing::SharedDir() / "fixtures" / "qwen35-tiny-a-w4a16");
  ASSERT_TRUE(original.ok()) << original.status();
  ASSERT_TRUE(WriteCheckpointTensors(dir_.path(), original->tensors(), 64 << 10).ok());

  absl::StatusOr<Checkpoint> resharded = Checkpoint::Open(dir_.path());
  ASSERT_TRUE(resharded.ok()) << resharded.status();
  // The 80 KiB embedding alone, then the other 114 KiB in shards of at most 64 KiB.
  EXPECT_EQ(resharded->shard_paths().size(), 3u);
  ASSERT_EQ(resharded->tensors().size(), original->tensors().size());
  for (const TensorView& tensor : original->tensors()) {
    const TensorView* copy = resharded->Find(tensor.name);
    ASSERT_NE(copy, nullptr) << tensor.name;
    EXPECT_EQ(copy->dtype, tensor.dtype) << tensor.name;
    EXPECT_EQ(copy->shape, tensor.shape) << tensor.name;
    EXPECT_TRUE(std::equal(copy->bytes.begin(), copy->bytes.end(), tensor.bytes.begin(),
                           tensor.bytes.end()))
        << tensor.name;
  }
}

TEST_F(CheckpointTest, ReportsADirectoryWithoutWeights) {
  const absl::Status status = Checkpoint::Open(dir_.path()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(),
              HasSubstr("holds neither model.safetensors nor model.safetensors.index.json"));
}

TEST_F(CheckpointTest, ReportsAMissingShard) {
  ASSERT_TRUE(WriteCheckpointTensors(dir_.path(), tensors_, 40).ok());
  std::filesystem::remove(dir_.path() / "model-00002-of-00003.safetensors");
  const absl::Status status = Checkpoint::Open(dir_.path()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(),
              HasSubstr(R"(names shard model-00002-of-00003.safetensors (holding "t2"), which is )"
                        "missing"));
}

TEST_F(CheckpointTest, ReportsAnIndexThatDisagreesWithItsShards) {
  ASSERT_TRUE(
      WriteSafetensorsFile(dir_.path() / "a.safetensors", std::span(tensors_).subspan(0, 2)).ok());
  WriteText(kShardIndexFileName,
            R"({"weight_map": {"t0": "a.safetensors", "t1": "a.safetensors",
                               "t7": "a.safetensors"}})");
  EXPECT_THAT(Checkpoint::Open(dir_.path()).status().message(),
              HasSubstr(R"(places tensor "t7" in a.safetensors, which does not hold it)"));

  WriteText(kShardIndexFileName, R"({"weight_map": {"t0": "a.safetensors"}})");
  EXPECT_THAT(Checkpoint::Open(dir_.path()).status().message(),
              HasSubstr(R"(a.safetensors holds tensor "t1", which )"));

  WriteText(kShardIndexFileName, R"({"weight_map": {"t0": "../a.safetensors"}})");
  EXPECT_THAT(Checkpoint::Open(dir_.path()).status().message(),
              HasSubstr(R"(tensor "t0" maps to "../a.safetensors", not a file name)"));

  WriteText(kShardIndexFileName, R"({"metadata": {}})");
  EXPECT_THAT(Checkpoint::Open(dir_.path()).status().message(),
              HasSubstr(R"("weight_map" is missing or not a JSON object)"));
}

}  // namespace
}  // namespace specd::io
