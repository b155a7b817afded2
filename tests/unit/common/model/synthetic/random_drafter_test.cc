// Random DFlash drafters (common/model/synthetic/random_drafter.h), as `specd drafter init` writes
// them: the reference's choice of tapped layers, and a checkpoint that loads and fits its target.
#include "common/model/synthetic/random_drafter.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "common/io/json_file.h"
#include "common/model/dflash_drafter.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/common/model/tiny_fixture.h"

namespace specd::model {
namespace {

TEST(RandomDrafterTest, TapsTheLayersTheDFlashReferenceTaps) {
  // research/dflash.md §2.2: Qwen3.5-4B (32 layers) and Qwen3-8B (36) with 5 draft layers.
  EXPECT_EQ(DFlashTargetLayerIds(32, 5), (std::vector<int64_t>{1, 8, 15, 22, 29}));
  EXPECT_EQ(DFlashTargetLayerIds(36, 5), (std::vector<int64_t>{1, 9, 17, 25, 33}));
  EXPECT_EQ(DFlashTargetLayerIds(32, 1), (std::vector<int64_t>{16}));
  // 1 + 3/2 = 2.5 rounds to even, as Python's round() does.
  EXPECT_EQ(DFlashTargetLayerIds(7, 3), (std::vector<int64_t>{1, 2, 4}));
}

TEST(RandomDrafterTest, WritesADrafterThatLoadsFitsItsTargetAndDrafts) {
  const std::unique_ptr<Qwen35Model> target = testing::LoadTinyFixture().model;
  ASSERT_NE(target, nullptr);
  specd::testing::TempDir dir;
  ASSERT_TRUE(WriteRandomDFlashDrafter(
                  dir.path(), target->config(),
                  {.num_layers = 2, .block_size = 4, .seed = 1, .mask_token_id = -1, .window = 0})
                  .ok());
  absl::StatusOr<DFlashDrafter> drafter = DFlashDrafter::Load(dir.path());
  ASSERT_TRUE(drafter.ok()) << drafter.status();
  EXPECT_TRUE(drafter->CheckTarget(target->config()).ok());
  const io::DFlashDraftConfig& config = drafter->config();
  EXPECT_EQ(config.block_size, 4);
  EXPECT_EQ(config.mask_token_id, target->config().vocab_size - 1);
  EXPECT_EQ(config.num_hidden_layers, 2);
  EXPECT_EQ(config.hidden_size, target->config().hidden_size);
  EXPECT_EQ(config.num_attention_heads, target->config().num_attention_heads);
  EXPECT_EQ(config.num_key_value_heads, target->config().num_key_value_heads);
  EXPECT_EQ(config.head_dim, target->config().head_dim);
  EXPECT_EQ(config.target_layer_ids, DFlashTargetLayerIds(4, 2));

  absl::StatusOr<DFlashCache> cache = drafter->NewCache(16);
  ASSERT_TRUE(cache.ok()) << cache.status();
  const auto taps = static_cast<int64_t>(config.target_layer_ids.size());
  ASSERT_TRUE(drafter->AppendContext(at::randn({5, taps * config.hidden_size}), *cache).ok());
  const std::vector<int64_t> block(4, config.mask_token_id);  // a MASK anchor will do
  absl::StatusOr<at::Tensor> draft =
      drafter->DraftBlock(target->Embed(at::tensor(block, at::kLong)), *cache);
  ASSERT_TRUE(draft.ok()) << draft.status();
  EXPECT_TRUE(draft->isfinite().all().item<bool>());
}

TEST(RandomDrafterTest, TheSameSeedWritesTheSameWeights) {
  const std::unique_ptr<Qwen35Model> target = testing::LoadTinyFixture().model;
  ASSERT_NE(target, nullptr);
  specd::testing::TempDir dir;
  const RandomDrafterOptions options{
      .num_layers = 1, .block_size = 4, .seed = 5, .mask_token_id = 7, .window = 0};
  for (const char* name : {"a", "b"}) {
    std::filesystem::create_directories(dir.path() / name);
    ASSERT_TRUE(WriteRandomDFlashDrafter(dir.path() / name, target->config(), options).ok());
  }
  std::ifstream a(dir.path() / "a" / "model.safetensors", std::ios::binary);
  std::ifstream b(dir.path() / "b" / "model.safetensors", std::ios::binary);
  EXPECT_TRUE(std::equal(std::istreambuf_iterator<char>(a), {}, std::istreambuf_iterator<char>(b)));
  absl::StatusOr<nlohmann::json> config = io::ReadJsonFile(dir.path() / "a" / "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ((*config)["dflash_config"]["mask_token_id"], 7);
}

TEST(RandomDrafterTest, RefusesAMaskTokenOutsideTheVocabulary) {
  const std::unique_ptr<Qwen35Model> target = testing::LoadTinyFixture().model;
  ASSERT_NE(target, nullptr);
  specd::testing::TempDir dir;
  EXPECT_EQ(WriteRandomDFlashDrafter(dir.path(), target->config(),
                                     {.num_layers = 1,
                                      .block_size = 4,
                                      .seed = 0,
                                      .mask_token_id = target->config().vocab_size,
                                      .window = 0})
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace specd::model
