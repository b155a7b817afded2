// Rolling a cache back after a verify block: for every number k of accepted tokens, what comes
// next must be what a cache that only ever saw those k tokens gives.
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "common/model/qwen35_model.h"
#include "gtest/gtest.h"
#include "tests/unit/common/model/tensor_matchers.h"
#include "tests/unit/common/model/tiny_fixture.h"

namespace specd::model {
namespace {

using testing::AllClose;

constexpr int64_t kPrompt = 100;
constexpr int64_t kBlockLength = 16;
// Both sides run the same chunked recurrence from the same state; only the projections' batch
// shapes differ, so they agree to float32 rounding (as it accumulates over the layers: up to
// 1.2e-4 on an AMD Zen 4, whose BLAS kernels round by batch shape differently from Intel's).
constexpr double kTolerance = 2e-4;

class RollbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::TinyFixture fixture = testing::LoadTinyFixture();
    ASSERT_NE(fixture.model, nullptr);
    model_ = std::move(fixture.model);
    ids_ = std::move(fixture.ids);
  }

  Qwen35Cache NewCache() const {
    absl::StatusOr<Qwen35Cache> cache = model_->NewCache(256);
    EXPECT_TRUE(cache.ok()) << cache.status();
    return *std::move(cache);
  }

  std::span<const int64_t> Ids(int64_t begin, int64_t end) const {
    return std::span<const int64_t>(ids_).subspan(begin, end - begin);
  }

  // Logits after feeding ids[kPrompt + accepted] to a cache that saw the prompt and then only
  // the first `accepted` block tokens.
  at::Tensor LogitsWithoutRejectedTokens(int64_t accepted) const {
    Qwen35Cache cache = NewCache();
    EXPECT_TRUE(model_->Prefill(Ids(0, kPrompt), cache).ok());
    if (accepted > 0) {
      EXPECT_TRUE(model_->ForwardBlock(Ids(kPrompt, kPrompt + accepted), cache).ok());
    }
    absl::StatusOr<at::Tensor> logits = model_->Decode(ids_[kPrompt + accepted], cache);
    EXPECT_TRUE(logits.ok()) << logits.status();
    return logits.ok() ? *logits : at::Tensor();
  }

  std::unique_ptr<Qwen35Model> model_;
  std::vector<int64_t> ids_;
};

TEST_F(RollbackTest, AfterRollbackToKTokensTheCacheActsAsIfItSawOnlyThose) {
  Qwen35Cache cache = NewCache();
  for (int64_t accepted = 0; accepted <= kBlockLength; ++accepted) {
    ASSERT_TRUE(model_->Prefill(Ids(0, kPrompt), cache).ok());
    ASSERT_TRUE(model_->ForwardBlock(Ids(kPrompt, kPrompt + kBlockLength), cache).ok());
    ASSERT_TRUE(cache.Rollback(accepted).ok());
    EXPECT_EQ(cache.length(), kPrompt + accepted);
    absl::StatusOr<at::Tensor> logits = model_->Decode(ids_[kPrompt + accepted], cache);
    ASSERT_TRUE(logits.ok()) << logits.status();
    EXPECT_TRUE(AllClose(*logits, LogitsWithoutRejectedTokens(accepted), kTolerance))
        << accepted << " tokens accepted";
  }
}

TEST_F(RollbackTest, SpeculationRoundsCanFollowOneAnother) {
  // Three verify rounds keeping 5, 0 and 16 tokens equal one cache fed just those tokens.
  Qwen35Cache speculative = NewCache();
  Qwen35Cache plain = NewCache();
  ASSERT_TRUE(model_->Prefill(Ids(0, kPrompt), speculative).ok());
  ASSERT_TRUE(model_->Prefill(Ids(0, kPrompt), plain).ok());
  int64_t position = kPrompt;
  for (const int64_t accepted : {5, 0, 16}) {
    ASSERT_TRUE(model_->ForwardBlock(Ids(position, position + kBlockLength), speculative).ok());
    ASSERT_TRUE(speculative.Rollback(accepted).ok());
    if (accepted > 0) {
      ASSERT_TRUE(model_->ForwardBlock(Ids(position, position + accepted), plain).ok());
    }
    position += accepted;
  }
  absl::StatusOr<at::Tensor> expected = model_->Decode(ids_[position], plain);
  absl::StatusOr<at::Tensor> actual = model_->Decode(ids_[position], speculative);
  ASSERT_TRUE(expected.ok() && actual.ok());
  EXPECT_TRUE(AllClose(*actual, *expected, kTolerance));
}

TEST_F(RollbackTest, OnlyTheLastBlockCanBeRolledBack) {
  Qwen35Cache cache = NewCache();
  ASSERT_TRUE(model_->Prefill(Ids(0, kPrompt), cache).ok());
  EXPECT_EQ(cache.Rollback(1).code(), absl::StatusCode::kFailedPrecondition);  // no block yet
  ASSERT_TRUE(model_->ForwardBlock(Ids(kPrompt, kPrompt + 4), cache).ok());
  EXPECT_EQ(cache.pending_block_length(), 4);
  EXPECT_EQ(cache.Rollback(5).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(model_->Decode(ids_[kPrompt + 4], cache).ok());  // commits the block
  EXPECT_EQ(cache.pending_block_length(), 0);
  EXPECT_EQ(cache.Rollback(2).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache.length(), kPrompt + 5);
}

// The DeltaNet layers take a block's kept rows in again at the start of the next forward: work
// the block's step deferred, which the speculation guard must not price as the next step's own.
TEST_F(RollbackTest, TheForwardAfterABlockReplaysWhatWasKeptOfIt) {
  Qwen35Cache cache = NewCache();
  ASSERT_TRUE(model_->Prefill(Ids(0, kPrompt), cache).ok());
  EXPECT_EQ(cache.replay_length(), 0);
  ASSERT_TRUE(model_->ForwardBlock(Ids(kPrompt, kPrompt + 4), cache).ok());
  EXPECT_EQ(cache.replay_length(), 4) << "kept whole unless rolled back";
  ASSERT_TRUE(cache.Rollback(2).ok());
  EXPECT_EQ(cache.replay_length(), 2);
  ASSERT_TRUE(model_->Decode(ids_[kPrompt + 2], cache).ok());
  EXPECT_EQ(cache.replay_length(), 0);
  ASSERT_TRUE(model_->ForwardBlock(Ids(kPrompt + 3, kPrompt + 6), cache).ok());
  cache.Reset();
  EXPECT_EQ(cache.replay_length(), 0);
}

}  // namespace
}  // namespace specd::model
