#include "common/int4/rtn.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/int4/float_encoding.h"
#include "common/int4/pack_quantized_io.h"
#include "common/io/checkpoint.h"
#include "tests/support/paths.h"
#include "tests/unit/common/int4/random_int4_weight.h"

namespace specd::quant {
namespace {

using ::specd::quant::testing::Int4Layout;
using ::specd::quant::testing::RandomPackedWeight;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

RtnOptions Options(int64_t group_size, bool symmetric, io::DType scale_dtype = io::DType::kF32) {
  return RtnOptions{.group_size = group_size, .symmetric = symmetric, .scale_dtype = scale_dtype};
}

std::vector<float> RandomWeight(int64_t count, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> weight(count);
  for (float& w : weight) w = normal(rng);
  return weight;
}

// Scales below are powers of two so that every quotient w / s is exact and the expected codes
// are those of real arithmetic.
TEST(MinMaxGridTest, SymmetricScaleIsTheLargerOfMinusMinAndMaxOverSevenAndAHalf) {
  const std::vector<float> weight = {1.875f, -0.625f, 0.3f,  -1.0f,   // max 1.875: s = 0.25
                                     -3.75f, 0.5f,    1.0f,  0.0f,    // min −3.75: s = 0.5
                                     0.5f,   1.0f,    2.25f, 3.75f};  // all positive: s = 0.5
  const absl::StatusOr<Int4Grid> grid = MinMaxGrid(weight, 3, 4, Options(4, true));
  ASSERT_TRUE(grid.ok()) << grid.status();
  EXPECT_EQ(grid->group_size, 4);
  EXPECT_THAT(grid->scales, ElementsAre(0.25f, 0.5f, 0.5f));
  EXPECT_TRUE(grid->symmetric());
}

TEST(MinMaxGridTest, AsymmetricScaleIsTheRangeOverFifteenAndTheZeroPointMapsMinToMinusEight) {
  const std::vector<float> weight = {-1.25f, 2.5f,  0.0f,  0.6f,    // s = 3.75 / 15, z = −8 + 5
                                     -0.3f,  3.45f, 1.0f,  2.0f,    // z = round(−8 + 1.2) = −7
                                     0.5f,   1.0f,  2.25f, 3.75f};  // min clamped to 0: z = −8
  const absl::StatusOr<Int4Grid> grid = MinMaxGrid(weight, 3, 4, Options(4, false));
  ASSERT_TRUE(grid.ok()) << grid.status();
  EXPECT_THAT(grid->scales, ElementsAre(0.25f, 0.25f, 0.25f));
  EXPECT_THAT(grid->zero_points, ElementsAre(-3, -7, -8));
}

TEST(MinMaxGridTest, GroupsRunAlongEachRowAndChannelWiseIsOneGroupPerRow) {
  const std::vector<float> weight = {0.75f, 0.0f, -7.5f, 1.0f,  // groups of 2: max 0.75, min −7.5
                                     15.0f, 0.0f, 0.0f,  0.0f};
  const absl::StatusOr<Int4Grid> grouped = MinMaxGrid(weight, 2, 4, Options(2, true));
  ASSERT_TRUE(grouped.ok()) << grouped.status();
  EXPECT_THAT(grouped->scales, ElementsAre(0.1f, 1.0f, 2.0f, 1.0f));  // the last group is zeros

  const absl::StatusOr<Int4Grid> channel = MinMaxGrid(weight, 2, 4, Options(0, true));
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_EQ(channel->group_size, 4);
  EXPECT_THAT(channel->scales, ElementsAre(1.0f, 2.0f));
}

TEST(MinMaxGridTest, AGroupOfZerosGetsScaleOne) {
  const std::vector<float> zeros(8, 0.0f);
  EXPECT_THAT(MinMaxGrid(zeros, 1, 8, Options(8, true))->scales, ElementsAre(1.0f));
  const absl::StatusOr<Int4Grid> asymmetric = MinMaxGrid(zeros, 1, 8, Options(8, false));
  EXPECT_THAT(asymmetric->scales, ElementsAre(1.0f));
  EXPECT_THAT(asymmetric->zero_points, ElementsAre(-8));
}

TEST(MinMaxGridTest, ScalesAreRoundedToTheirStoredDTypeBeforeTheZeroPointIsComputed) {
  const std::vector<float> weight = {-0.1f, 1.0f, 0.2f, 0.3f};
  const absl::StatusOr<Int4Grid> grid =
      MinMaxGrid(weight, 1, 4, Options(4, false, io::DType::kBF16));
  ASSERT_TRUE(grid.ok()) << grid.status();
  const float scale = RoundToDType(1.1f / 15.0f, io::DType::kBF16);
  EXPECT_EQ(grid->scale_dtype, io::DType::kBF16);
  EXPECT_THAT(grid->scales, ElementsAre(scale));
  EXPECT_THAT(grid->zero_points,
              ElementsAre(static_cast<int8_t>(std::nearbyint(-8.0f + 0.1f / scale))));
}

TEST(QuantizeRtnTest, CodesAreWOverSPlusZRoundedHalfToEvenThenClampedToInt4) {
  const std::vector<float> symmetric = {1.875f, -0.625f, 0.3f,  -1.0f,  // s = 0.25
                                        -3.75f, 0.25f,   1.25f, 0.0f};  // s = 0.5
  absl::StatusOr<PackedInt4Weight> packed = QuantizeRtn(symmetric, 2, 4, Options(4, true));
  ASSERT_TRUE(packed.ok()) << packed.status();
  // 7.5 clamps to 7; −2.5, −7.5, 0.5 and 2.5 round half to even.
  EXPECT_THAT(UnpackInt4(*packed), ElementsAre(7, -2, 1, -4, -8, 0, 2, 0));

  const std::vector<float> asymmetric = {-1.25f, 2.5f, 0.0f,  0.6f,    // s = 0.25, z = −3
                                         0.5f,   1.0f, 2.25f, 3.75f};  // s = 0.25, z = −8
  packed = QuantizeRtn(asymmetric, 2, 4, Options(4, false));
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_THAT(packed->grid.zero_points, ElementsAre(-3, -8));
  EXPECT_THAT(UnpackInt4(*packed), ElementsAre(-5 - 3, 10 - 3, 0 - 3, -1,  // 2.4 − 3 rounds to −1
                                               2 - 8, 4 - 8, 9 - 8, 15 - 8));
}

TEST(QuantizeRtnTest, DequantizedWeightIsWithinHalfAScaleOfTheOriginal) {
  std::mt19937 rng(3);
  for (const RtnOptions& options :
       {Options(32, true), Options(32, false), Options(0, true), Options(16, false),
        Options(64, true, io::DType::kBF16), Options(8, false, io::DType::kF16)}) {
    const int64_t rows = 24, cols = 128;
    const std::vector<float> weight = RandomWeight(rows * cols, rng);
    const absl::StatusOr<PackedInt4Weight> packed = QuantizeRtn(weight, rows, cols, options);
    ASSERT_TRUE(packed.ok()) << packed.status();
    const Int4Grid& grid = packed->grid;
    const std::vector<float> dequantized = Dequantize(*packed);
    int64_t outside = 0;
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t col = 0; col < cols; ++col) {
        const int64_t at = row * grid.groups() + grid.GroupOf(col);
        const double scale = grid.scales[at];
        const double zero = grid.symmetric() ? 0 : grid.zero_points[at];
        const double w = weight[row * cols + col];
        // Only values the grid covers to within half a step can be that close (the extremes of
        // a group sit on that boundary, give or take float32 rounding); with float32 scales
        // min-max covers them all, a rounded-down bf16/f16 scale may leave an extreme out.
        constexpr double kRounding = 1e-5;
        const double on_grid = w / scale + zero;
        if (on_grid < kInt4Min - 0.5 - kRounding || on_grid > kInt4Max + 0.5 + kRounding) {
          ++outside;
          continue;
        }
        EXPECT_LE(std::abs(dequantized[row * cols + col] - w), scale * (0.5 + kRounding))
            << "[" << row << ", " << col << "] group size " << options.group_size;
      }
    }
    if (options.scale_dtype == io::DType::kF32) {
      EXPECT_EQ(outside, 0);
    }
  }
}

// The qwen35-tiny-a-w4a16 fixture was made by the peer's RTN (../shared/fixtures/
// gpu_fixtures.py: symmetric, group 32, scale = absmax / 7.5 rounded to bf16, codes
// round(w / s) in float32) from qwen35-tiny-a's float32 weights: the same min-max grid.
TEST(QuantizeRtnTest, GivesTheCodesAndScalesOfThePeersW4A16Fixture) {
  const std::filesystem::path fixtures = specd::testing::SharedDir() / "fixtures";
  absl::StatusOr<io::Checkpoint> dense = io::Checkpoint::Open(fixtures / "qwen35-tiny-a");
  absl::StatusOr<io::Checkpoint> peer = io::Checkpoint::Open(fixtures / "qwen35-tiny-a-w4a16");
  ASSERT_TRUE(dense.ok() && peer.ok()) << dense.status() << peer.status();
  int64_t compared = 0;
  for (const io::TensorView& tensor : peer->tensors()) {
    if (!tensor.name.ends_with(".weight_packed")) continue;
    const std::string linear = tensor.name.substr(0, tensor.name.rfind('.'));
    const absl::StatusOr<PackedInt4Weight> expected = LoadPackedInt4Weight(*peer, linear);
    ASSERT_TRUE(expected.ok()) << expected.status();
    const io::TensorView& weight = **dense->Get(linear + ".weight");
    const absl::StatusOr<PackedInt4Weight> packed =
        QuantizeRtn(*DecodeFloats(weight), weight.shape[0], weight.shape[1],
                    Options(32, true, io::DType::kBF16));
    ASSERT_TRUE(packed.ok()) << packed.status();
    EXPECT_EQ(packed->packed, expected->packed) << linear;
    EXPECT_EQ(packed->grid.scales, expected->grid.scales) << linear;
    ++compared;
  }
  EXPECT_EQ(compared, 25);
}

TEST(QuantizeOnGridTest, QuantizingADequantizedWeightOnItsGridGivesItBack) {
  std::mt19937 rng(5);
  for (const Int4Layout& layout : std::vector<Int4Layout>{
           {.rows = 16, .cols = 64, .group_size = 16},
           {.rows = 9, .cols = 128, .group_size = 32, .symmetric = false},
           {.rows = 7, .cols = 96, .group_size = 96},                       // channel-wise
           {.rows = 3, .cols = 100, .group_size = 10, .symmetric = false},  // K not a multiple of 8
           {.rows = 12, .cols = 64, .group_size = 16, .act_order = true},
           {.rows = 9, .cols = 128, .group_size = 32, .symmetric = false, .act_order = true},
           {.rows = 5,
            .cols = 40,
            .group_size = 8,
            .symmetric = false,
            .scale_dtype = io::DType::kF16},
           {.rows = 4, .cols = 32, .group_size = 8, .scale_dtype = io::DType::kF32}}) {
    const PackedInt4Weight weight = RandomPackedWeight(layout, rng);
    const absl::StatusOr<PackedInt4Weight> again = QuantizeOnGrid(Dequantize(weight), weight.grid);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->packed, weight.packed) << layout.rows << "x" << layout.cols;
    EXPECT_EQ(again->grid.scales, weight.grid.scales);
    EXPECT_EQ(again->grid.zero_points, weight.grid.zero_points);
    EXPECT_EQ(again->grid.group_index, weight.grid.group_index);
  }
}

TEST(RtnTest, AGroupSizeThatDoesNotDivideTheColumnsIsAClearError) {
  const std::vector<float> weight(16, 0.5f);
  for (const int64_t group_size : {3, 5, -4, 16}) {
    EXPECT_THAT(
        QuantizeRtn(weight, 2, 8, Options(group_size, true)).status().message(),
        HasSubstr(absl::StrCat("group size ", group_size, " does not divide the 8 input columns")));
  }
  Int4Grid grid = MinMaxGrid(weight, 2, 8, Options(4, true)).value();
  grid.group_size = 3;
  EXPECT_THAT(QuantizeOnGrid(weight, grid).status().message(),
              HasSubstr("group size 3 does not divide the 8 input columns"));
}

TEST(RtnTest, AWeightOfTheWrongSizeOrScalesOfANonFloatTypeAreClearErrors) {
  const std::vector<float> weight(15, 0.5f);
  EXPECT_THAT(QuantizeRtn(weight, 2, 8, Options(4, true)).status().message(),
              HasSubstr("expected a [2, 8] weight, got 15 values"));
  EXPECT_THAT(QuantizeRtn(std::vector<float>(16), 2, 8, Options(4, true, io::DType::kI32))
                  .status()
                  .message(),
              HasSubstr("scales cannot be stored as I32"));
}

}  // namespace
}  // namespace specd::quant
