#include "common/int4/pack_quantized_io.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "common/io/safetensors_writer.h"
#include "tests/support/paths.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/common/int4/random_int4_weight.h"

namespace specd::quant {
namespace {

using ::specd::quant::testing::Int4Layout;
using ::specd::quant::testing::RandomPackedWeight;
using ::testing::HasSubstr;

constexpr char kLinear[] = "model.layers.0.mlp.down_proj";

// Writes `tensors` as a one-file checkpoint in `dir` and opens it.
io::Checkpoint WriteCheckpoint(const std::filesystem::path& dir,
                               const std::vector<OwnedTensor>& tensors) {
  std::vector<io::TensorView> views;
  for (const OwnedTensor& tensor : tensors) views.push_back(tensor.View());
  EXPECT_TRUE(io::WriteSafetensorsFile(dir / io::kSingleFileName, views).ok());
  absl::StatusOr<io::Checkpoint> checkpoint = io::Checkpoint::Open(dir);
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
  return *std::move(checkpoint);
}

OwnedTensor& Named(std::vector<OwnedTensor>& tensors, const std::string& suffix) {
  for (OwnedTensor& tensor : tensors) {
    if (tensor.name == kLinear + suffix) return tensor;
  }
  ADD_FAILURE() << "no tensor " << suffix;
  return tensors.front();
}

template <typename T>
T Element(const OwnedTensor& tensor, int64_t i) {
  T value;
  std::memcpy(&value, tensor.data.data() + i * sizeof(T), sizeof(T));
  return value;
}

TEST(PackQuantizedTensorsTest, AreTheTensorsCompressedTensorsWrites) {
  std::mt19937 rng(1);
  const PackedInt4Weight weight = RandomPackedWeight(
      {.rows = 20, .cols = 256, .group_size = 64, .symmetric = false, .act_order = true}, rng);
  std::vector<std::tuple<std::string, io::DType, std::vector<int64_t>>> layout;
  for (const OwnedTensor& tensor : PackQuantizedTensors(weight, kLinear)) {
    layout.emplace_back(tensor.name, tensor.dtype, tensor.shape);
  }
  const std::string prefix = kLinear;
  EXPECT_THAT(
      layout,
      ::testing::ElementsAre(
          std::tuple(prefix + ".weight_packed", io::DType::kI32, std::vector<int64_t>{20, 32}),
          std::tuple(prefix + ".weight_scale", io::DType::kBF16, std::vector<int64_t>{20, 4}),
          std::tuple(prefix + ".weight_zero_point", io::DType::kI32,
                     std::vector<int64_t>{3, 4}),  // ceil(20 / 8) words along N
          std::tuple(prefix + ".weight_g_idx", io::DType::kI32, std::vector<int64_t>{256}),
          std::tuple(prefix + ".weight_shape", io::DType::kI64, std::vector<int64_t>{2})));
}

TEST(PackQuantizedTensorsTest, PacksZeroPointsAlongNLowNibbleFirstHoldingZeroPlus8) {
  Int4Grid grid{.rows = 9,
                .cols = 8,
                .group_size = 8,
                .scales = std::vector<float>(9, 1.0f),
                .scale_dtype = io::DType::kF32,
                .zero_points = {-4, -3, -2, -1, 0, 1, 2, 3, 4},  // row r: nibble r + 4
                .group_index = {}};
  std::vector<OwnedTensor> tensors =
      PackQuantizedTensors(*PackInt4(grid, std::vector<int8_t>(72)), kLinear);
  const OwnedTensor& zero_point = Named(tensors, ".weight_zero_point");
  EXPECT_EQ(static_cast<uint32_t>(Element<int32_t>(zero_point, 0)), 0xBA987654u);  // rows 0..7
  EXPECT_EQ(Element<int32_t>(zero_point, 1), 0xC);                                 // row 8
}

TEST(LoadPackedInt4WeightTest, ReadsBackWhatWasWrittenForEveryGridKind) {
  specd::testing::TempDir dir;
  std::mt19937 rng(2);
  for (const Int4Layout& layout : std::vector<Int4Layout>{
           {.rows = 16, .cols = 128, .group_size = 32},
           {.rows = 13, .cols = 96, .group_size = 32, .symmetric = false},  // N % 8 != 0
           {.rows = 8, .cols = 64, .group_size = 64, .symmetric = false},   // channel-wise
           {.rows = 10, .cols = 128, .group_size = 16, .act_order = true},
           {.rows = 24, .cols = 256, .group_size = 128, .symmetric = false, .act_order = true},
           {.rows = 4, .cols = 40, .group_size = 8, .scale_dtype = io::DType::kF16},
           {.rows = 4, .cols = 40, .group_size = 20, .scale_dtype = io::DType::kF32}}) {
    const PackedInt4Weight written = RandomPackedWeight(layout, rng);
    const io::Checkpoint checkpoint =
        WriteCheckpoint(dir.path(), PackQuantizedTensors(written, kLinear));
    const absl::StatusOr<PackedInt4Weight> read = LoadPackedInt4Weight(checkpoint, kLinear);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->packed, written.packed);
    EXPECT_EQ(read->grid.rows, layout.rows);
    EXPECT_EQ(read->grid.cols, layout.cols);
    EXPECT_EQ(read->grid.group_size, layout.group_size);
    EXPECT_EQ(read->grid.scales, written.grid.scales);
    EXPECT_EQ(read->grid.scale_dtype, layout.scale_dtype);
    EXPECT_EQ(read->grid.zero_points, written.grid.zero_points);
    EXPECT_EQ(read->grid.group_index, written.grid.group_index);
  }
}

class W4A16FixtureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::filesystem::path fixtures = specd::testing::SharedDir() / "fixtures";
    if (!std::filesystem::exists(fixtures / "qwen35-tiny-a-w4a16")) {
      GTEST_SKIP() << "no fixtures at " << fixtures;
    }
    quantized_ = *io::Checkpoint::Open(fixtures / "qwen35-tiny-a-w4a16");
    original_ = *io::Checkpoint::Open(fixtures / "qwen35-tiny-a");
  }

  std::optional<io::Checkpoint> quantized_;
  std::optional<io::Checkpoint> original_;
};

TEST_F(W4A16FixtureTest, DownProjDequantizesToCodeTimesBf16Scale) {
  const absl::StatusOr<PackedInt4Weight> weight = LoadPackedInt4Weight(*quantized_, kLinear);
  ASSERT_TRUE(weight.ok()) << weight.status();
  ASSERT_EQ(weight->grid.group_size, 32);  // as the fixture's README says
  ASSERT_TRUE(weight->grid.symmetric());
  // The definition, straight from the stored bytes.
  const io::TensorView& packed = **quantized_->Get(absl::StrCat(kLinear, ".weight_packed"));
  const io::TensorView& scale = **quantized_->Get(absl::StrCat(kLinear, ".weight_scale"));
  const int64_t rows = packed.shape[0], cols = packed.shape[1] * 8, groups = scale.shape[1];
  const std::vector<float> dense = Dequantize(*weight);
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t k = 0; k < cols; ++k) {
      uint32_t word;
      std::memcpy(&word, packed.bytes.data() + 4 * (n * cols / 8 + k / 8), 4);
      uint16_t scale_bits;
      std::memcpy(&scale_bits, scale.bytes.data() + 2 * (n * groups + k / 32), 2);
      const int q = static_cast<int>((word >> (4 * (k % 8))) & 0xF) - 8;
      const float s = std::bit_cast<float>(static_cast<uint32_t>(scale_bits) << 16);
      ASSERT_EQ(dense[n * cols + k], q * s) << "[" << n << ", " << k << "]";
    }
  }
}

TEST_F(W4A16FixtureTest, EveryQuantizedWeightIsWithinHalfAStepOfItsFloatOriginal) {
  for (const char* linear : {"model.layers.0.mlp.down_proj", "model.layers.0.linear_attn.out_proj",
                             "model.layers.3.self_attn.q_proj", "model.layers.2.mlp.gate_proj"}) {
    const absl::StatusOr<PackedInt4Weight> weight = LoadPackedInt4Weight(*quantized_, linear);
    ASSERT_TRUE(weight.ok()) << weight.status();
    const io::TensorView& original = **original_->Get(absl::StrCat(linear, ".weight"));
    ASSERT_EQ(original.dtype, io::DType::kF32);
    const std::vector<float> dense = Dequantize(*weight);
    const Int4Grid& grid = weight->grid;
    for (int64_t i = 0; i < grid.rows * grid.cols; ++i) {
      float w;
      std::memcpy(&w, original.bytes.data() + 4 * i, 4);
      const float step =
          grid.scales[(i / grid.cols) * grid.groups() + (i % grid.cols) / grid.group_size];
      // Round to nearest: half a step; the absmax element may clip from 7.5 steps to 7, a bit
      // more once the scale is rounded to bf16.
      ASSERT_LE(std::abs(dense[i] - w), 0.55f * step) << linear << " element " << i;
    }
  }
}

// The tensors of a valid asymmetric act-order linear, for the tests to break one at a time.
std::vector<OwnedTensor> ValidTensors() {
  std::mt19937 rng(3);
  return PackQuantizedTensors(
      RandomPackedWeight(
          {.rows = 16, .cols = 64, .group_size = 16, .symmetric = false, .act_order = true}, rng),
      kLinear);
}

std::string LoadError(const std::vector<OwnedTensor>& tensors) {
  specd::testing::TempDir dir;
  const absl::StatusOr<PackedInt4Weight> weight =
      LoadPackedInt4Weight(WriteCheckpoint(dir.path(), tensors), kLinear);
  return weight.ok() ? "loaded" : std::string(weight.status().message());
}

TEST(LoadPackedInt4WeightTest, NamesTheMissingTensor) {
  for (const char* suffix : {".weight_scale", ".weight_packed", ".weight_shape"}) {
    std::vector<OwnedTensor> tensors = ValidTensors();
    std::erase_if(tensors,
                  [&](const OwnedTensor& t) { return t.name == absl::StrCat(kLinear, suffix); });
    EXPECT_THAT(LoadError(tensors), HasSubstr(absl::StrCat(kLinear, suffix))) << suffix;
  }
}

TEST(LoadPackedInt4WeightTest, NamesTheTensorWhoseShapeIsWrong) {
  struct Case {
    const char* suffix;
    std::vector<int64_t> shape;
    const char* message;
  };
  for (const Case& bad : std::vector<Case>{
           {".weight_packed", {16, 4}, ".weight_packed: shape [16, 4], expected [16, 8]"},
           {".weight_scale", {8, 4}, ".weight_scale: shape [8, 4], expected [16, K/G]"},
           {".weight_scale", {16, 3}, ".weight_scale: 3 groups do not divide K = 64"},
           {".weight_zero_point", {16, 4}, ".weight_zero_point: shape [16, 4], expected [2, 4]"},
           {".weight_g_idx", {32}, ".weight_g_idx: shape [32], expected [64]"},
           {".weight_shape", {3}, ".weight_shape: shape [3], expected [2]"}}) {
    std::vector<OwnedTensor> tensors = ValidTensors();
    OwnedTensor& tensor = Named(tensors, bad.suffix);
    tensor.shape = bad.shape;
    int64_t elements = 1;
    for (int64_t dim : bad.shape) elements *= dim;
    tensor.data.resize(elements * io::DTypeSize(tensor.dtype));
    EXPECT_THAT(LoadError(tensors), HasSubstr(absl::StrCat(kLinear, bad.message)));
  }
}

TEST(LoadPackedInt4WeightTest, RefusesScalesThatAreNotFloats) {
  std::vector<OwnedTensor> tensors = ValidTensors();
  Named(tensors, ".weight_scale").dtype = io::DType::kI16;
  EXPECT_THAT(LoadError(tensors),
              HasSubstr(absl::StrCat(kLinear, ".weight_scale: dtype I16 is not a float format")));
}

TEST(LoadPackedInt4WeightTest, RefusesGroupIndicesPastTheLastGroup) {
  std::vector<OwnedTensor> tensors = ValidTensors();
  OwnedTensor& g_idx = Named(tensors, ".weight_g_idx");
  const int32_t past_last = 4;  // 64 columns / 16 per group
  std::memcpy(g_idx.data.data(), &past_last, sizeof(past_last));
  EXPECT_THAT(LoadError(tensors),
              HasSubstr(absl::StrCat(kLinear, ": group index 4 is outside [0, 4)")));
}

}  // namespace
}  // namespace specd::quant
