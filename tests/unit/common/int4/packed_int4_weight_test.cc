#include "common/int4/packed_int4_weight.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "tests/unit/common/int4/random_int4_weight.h"

namespace specd::quant {
namespace {

using ::specd::quant::testing::Int4Layout;
using ::specd::quant::testing::RandomCodes;
using ::specd::quant::testing::RandomGrid;
using ::testing::HasSubstr;

Int4Grid SymmetricGrid(int64_t rows, int64_t cols, int64_t group_size, float scale = 1.0f) {
  return Int4Grid{.rows = rows,
                  .cols = cols,
                  .group_size = group_size,
                  .scales = std::vector<float>(rows * (cols / group_size), scale),
                  .scale_dtype = io::DType::kF32,
                  .zero_points = {},
                  .group_index = {}};
}

TEST(PackInt4Test, ColumnKIsNibbleKMod8OfWordKOver8LowNibbleFirstHoldingQPlus8) {
  const std::vector<int8_t> codes = {-8, -7, -6, -5, -4, -3, -2, -1,  // row 0: nibbles 0..7
                                     0,  1,  2,  3,  4,  5,  6,  7};  // row 1: nibbles 8..15
  const absl::StatusOr<PackedInt4Weight> weight = PackInt4(SymmetricGrid(2, 8, 8), codes);
  ASSERT_TRUE(weight.ok()) << weight.status();
  EXPECT_EQ(static_cast<uint32_t>(weight->packed[0]), 0x76543210u);
  EXPECT_EQ(static_cast<uint32_t>(weight->packed[1]), 0xFEDCBA98u);  // a negative int32
}

TEST(PackInt4Test, PadsTheLastWordOfARowWithZeroNibbles) {
  const absl::StatusOr<PackedInt4Weight> weight =
      PackInt4(SymmetricGrid(1, 10, 5), std::vector<int8_t>(10, 7));
  ASSERT_TRUE(weight.ok()) << weight.status();
  ASSERT_EQ(weight->packed.size(), 2u);  // ceil(10 / 8)
  EXPECT_EQ(static_cast<uint32_t>(weight->packed[1]), 0xFFu);
}

TEST(PackInt4Test, UnpackGivesBackTheCodesForAnyShapeAndGrid) {
  std::mt19937 rng(1);
  for (const Int4Layout& layout :
       std::vector<Int4Layout>{{1, 8, 8},
                               {5, 24, 8, /*symmetric=*/false},
                               {16, 100, 10},  // K not a multiple of 8
                               {33, 256, 64, /*symmetric=*/false},
                               {7, 96, 96},  // channel-wise
                               {9, 128, 32, /*symmetric=*/false, /*act_order=*/true},
                               {12, 64, 16, /*symmetric=*/true, /*act_order=*/true}}) {
    const std::vector<int8_t> codes = RandomCodes(layout.rows * layout.cols, rng);
    const absl::StatusOr<PackedInt4Weight> weight = PackInt4(RandomGrid(layout, rng), codes);
    ASSERT_TRUE(weight.ok()) << weight.status();
    EXPECT_EQ(UnpackInt4(*weight), codes) << layout.rows << "x" << layout.cols;
  }
}

TEST(DequantizeTest, IsCodeMinusZeroPointTimesTheScaleOfTheColumnsGroup) {
  Int4Grid grid = SymmetricGrid(2, 8, 4);
  grid.scales = {0.5f, 2.0f,    // row 0: groups 0, 1
                 0.25f, 4.0f};  // row 1
  grid.zero_points = {1, -2,    // row 0
                      0, 3};    // row 1
  const std::vector<int8_t> codes = {3, -8, 7, 0, 3, -8, 7, 0, 1, 2, 3, 4, 5, 6, 7, -1};
  const absl::StatusOr<PackedInt4Weight> weight = PackInt4(grid, codes);
  ASSERT_TRUE(weight.ok()) << weight.status();
  EXPECT_THAT(
      Dequantize(*weight),
      ::testing::ElementsAre((3 - 1) * 0.5f, (-8 - 1) * 0.5f, (7 - 1) * 0.5f, -0.5f, (3 + 2) * 2.0f,
                             (-8 + 2) * 2.0f, (7 + 2) * 2.0f, 4.0f, 0.25f, 0.5f, 0.75f, 1.0f,
                             (5 - 3) * 4.0f, (6 - 3) * 4.0f, (7 - 3) * 4.0f, -16.0f));
}

TEST(DequantizeTest, TakesTheGroupOfEachColumnFromTheActOrderIndex) {
  Int4Grid grid = SymmetricGrid(1, 8, 4);
  grid.scales = {1.0f, 10.0f};
  grid.group_index = {1, 0, 1, 0, 1, 0, 1, 0};
  const absl::StatusOr<PackedInt4Weight> weight =
      PackInt4(grid, std::vector<int8_t>{1, 1, 1, 1, 2, 2, 2, 2});
  ASSERT_TRUE(weight.ok()) << weight.status();
  EXPECT_THAT(Dequantize(*weight), ::testing::ElementsAre(10, 1, 10, 1, 20, 2, 20, 2));
}

TEST(PackInt4Test, RoundsScalesToTheDTypeACheckpointStoresThemIn) {
  Int4Grid grid = SymmetricGrid(1, 8, 8, 0.1f);
  grid.scale_dtype = io::DType::kBF16;
  EXPECT_EQ(PackInt4(grid, std::vector<int8_t>(8))->grid.scales[0], 0.10009765625f);
  grid.scale_dtype = io::DType::kF16;
  EXPECT_EQ(PackInt4(grid, std::vector<int8_t>(8))->grid.scales[0], 0.0999755859375f);
}

TEST(PackInt4Test, RefusesCodesAndGridsOutsideTheFormat) {
  const std::vector<int8_t> eight(8, 0);
  EXPECT_THAT(PackInt4(SymmetricGrid(1, 8, 8), std::vector<int8_t>{0, 0, 8, 0, 0, 0, 0, 0})
                  .status()
                  .message(),
              HasSubstr("code 8 at [0, 2] is outside [-8, 7]"));
  EXPECT_THAT(PackInt4(SymmetricGrid(1, 8, 8), std::vector<int8_t>(7)).status().message(),
              HasSubstr("expected 8 codes"));

  Int4Grid uneven = SymmetricGrid(1, 8, 8);
  uneven.group_size = 3;
  EXPECT_THAT(PackInt4(uneven, eight).status().message(),
              HasSubstr("group size 3 does not divide the 8 input columns"));

  Int4Grid missing_scale = SymmetricGrid(1, 8, 4);
  missing_scale.scales.pop_back();
  EXPECT_THAT(PackInt4(missing_scale, eight).status().message(),
              HasSubstr("expected 2 scales [1, 2], got 1"));

  Int4Grid bad_zero = SymmetricGrid(1, 8, 8);
  bad_zero.zero_points = {9};
  EXPECT_THAT(PackInt4(bad_zero, eight).status().message(),
              HasSubstr("zero point 9 is outside [-8, 7]"));

  Int4Grid bad_index = SymmetricGrid(1, 8, 4);
  bad_index.group_index = {0, 0, 0, 0, 1, 1, 1, 2};
  EXPECT_THAT(PackInt4(bad_index, eight).status().message(),
              HasSubstr("group index 2 is outside [0, 2)"));

  Int4Grid int_scales = SymmetricGrid(1, 8, 8);
  int_scales.scale_dtype = io::DType::kI32;
  EXPECT_THAT(PackInt4(int_scales, eight).status().message(),
              HasSubstr("scales cannot be stored as I32"));
}

}  // namespace
}  // namespace specd::quant
