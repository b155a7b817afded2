// DFlash drafter training on a tiny random target and byte-level chats whose answers repeat the
// alphabet: the loss weights decay as the recipe says, anchors land only on assistant tokens with
// room for a block, and a short run makes the drafter predict the answers.
#include "training/drafter_training.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "common/model/synthetic/random_checkpoint.h"
#include "common/model/synthetic/random_drafter.h"
#include "common/text/tokenizer.h"
#include "tests/unit/training/drafter_fixture.h"
#include "training/byte_tokenizer.h"
#include "training/conversations.h"

namespace specd::train {
namespace {

using testing::kBlockSize;

using DrafterTrainingTest = testing::DrafterFixture;

TEST(DFlashSlotWeightTest, DecaysFromOneAfterTheAnchor) {
  EXPECT_EQ(DFlashSlotWeight(0, 7.0), 0.0);
  EXPECT_DOUBLE_EQ(DFlashSlotWeight(1, 7.0), 1.0);
  EXPECT_NEAR(DFlashSlotWeight(2, 7.0), 0.867, 5e-4);
  EXPECT_NEAR(DFlashSlotWeight(3, 7.0), 0.751, 5e-4);
  EXPECT_NEAR(DFlashSlotWeight(15, 7.0), 0.135, 5e-4);
  EXPECT_EQ(DFlashSlotWeight(0, 0.0), 0.0);
  EXPECT_EQ(DFlashSlotWeight(9, 0.0), 1.0);
}

TEST(AnchorTest, AnchorsAreAssistantPositionsWithRoomForABlockAndAContext) {
  // Assistant tokens at 0, 5..11 and 17..19 of 20; blocks of 4 fit at p <= 16.
  at::Tensor mask = at::zeros({20}, at::kBool);
  mask[0] = true;
  mask.narrow(0, 5, 7).fill_(true);
  mask.narrow(0, 17, 3).fill_(true);
  EXPECT_EQ(AnchorCandidates(mask, 4), (std::vector<int64_t>{5, 6, 7, 8, 9, 10, 11}));

  const std::vector<int64_t> sampled = SampleAnchors(mask, 4, 3, /*seed=*/9, /*stream=*/2);
  ASSERT_EQ(sampled.size(), 3);
  EXPECT_TRUE(std::is_sorted(sampled.begin(), sampled.end()));
  EXPECT_EQ(std::adjacent_find(sampled.begin(), sampled.end()), sampled.end());
  for (const int64_t p : sampled) EXPECT_TRUE(p >= 5 && p <= 11) << p;
  EXPECT_EQ(SampleAnchors(mask, 4, 3, 9, 2), sampled);
  EXPECT_EQ(SampleAnchors(mask, 4, 100, 9, 2), AnchorCandidates(mask, 4));
  EXPECT_TRUE(SampleAnchors(at::zeros({20}, at::kBool), 4, 3, 9, 2).empty());
}

TEST_F(DrafterTrainingTest, AnchorsOfPackedChatsLandOnTheAnswers) {
  absl::StatusOr<PackedDataset> dataset = PackedDataset::Open(data());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  int64_t anchors = 0;
  for (int64_t i = 0; i < dataset->size(Split::kTrain); ++i) {
    const Sequence sequence = dataset->Get(Split::kTrain, i);
    for (const int64_t p : SampleAnchors(sequence.mask, kBlockSize, 16, 0, i)) {
      EXPECT_TRUE(sequence.mask[p].item<bool>()) << p;
      EXPECT_GE(p, 1);
      EXPECT_LE(p + kBlockSize, dataset->sequence_length());
      ++anchors;
    }
  }
  EXPECT_GT(anchors, 16);
}

TEST_F(DrafterTrainingTest, AShortRunLearnsTheAnswers) {
  absl::StatusOr<model::Qwen35Model> model = model::Qwen35Model::Load(target());
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<model::DFlashDrafter> random = model::DFlashDrafter::Load(init());
  ASSERT_TRUE(random.ok()) << random.status();
  absl::StatusOr<PackedDataset> dataset = PackedDataset::Open(data());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  absl::StatusOr<DrafterMetrics> before =
      EvaluateDrafter(*model, *random, *dataset, Split::kValidation, 0, 5, 32, 7.0);
  ASSERT_TRUE(before.ok()) << before.status();

  const int64_t steps = 30;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<DrafterMetrics> after = TrainDrafter(DrafterOptions({.out = dir_.path() / "run",
                                                                      .init = init(),
                                                                      .anchors = 64,
                                                                      .steps = steps,
                                                                      .lr = 3e-2,
                                                                      .warmup_ratio = 0.1,
                                                                      .validate_every = 10,
                                                                      .seed = 5}));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(after.ok()) << after.status();
  std::printf(
      "accuracy %.3f -> %.3f, expected acceptance %.3f -> %.3f, loss %.3f -> %.3f; "
      "%.3f s per step (validation included)\n",
      before->accuracy, after->accuracy, before->expected_acceptance, after->expected_acceptance,
      before->loss, after->loss, seconds / steps);
  EXPECT_LT(before->accuracy, 0.1);
  EXPECT_GT(after->accuracy, before->accuracy + 0.3);
  EXPECT_GT(after->expected_acceptance, before->expected_acceptance + 1.0);
  EXPECT_LT(after->loss, before->loss);
  ASSERT_EQ(after->position_accuracy.size(), kBlockSize - 1);
  for (size_t k = 0; k < after->position_accuracy.size(); ++k) {
    std::printf("slot %zu accuracy %.3f\n", k + 1, after->position_accuracy[k]);
  }
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "run" / "best" / "config.json"));
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "run" / "metrics.jsonl"));
}

TEST_F(DrafterTrainingTest, RefusesADrafterMadeForAnotherTarget) {
  io::Qwen35TextConfig other = testing::TinyTarget();
  other.num_hidden_layers = 2;
  other.layer_types = {io::LayerType::kLinearAttention, io::LayerType::kFullAttention};
  const std::filesystem::path mismatched = dir_.path() / "mismatched";
  std::filesystem::create_directories(mismatched);
  ASSERT_TRUE(model::WriteRandomDFlashDrafter(mismatched, other, testing::kDrafterInit).ok());
  const absl::StatusOr<DrafterMetrics> trained =
      TrainDrafter(DrafterOptions({.out = dir_.path() / "run",
                                   .init = mismatched,
                                   .anchors = 32,
                                   .steps = 1,
                                   .lr = 1e-3,
                                   .warmup_ratio = 0,
                                   .validate_every = 0,
                                   .seed = 0}));
  EXPECT_EQ(trained.status().code(), absl::StatusCode::kInvalidArgument) << trained.status();
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "run"));
}

}  // namespace
}  // namespace specd::train
