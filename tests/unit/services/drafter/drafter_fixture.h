#pragma once
// What the drafter service's tests share: drafter handlers, Draft requests, and in-process
// drafting to hold the service to: a engine::DFlashBlockDrafter fed the way
// engine::SpeculativeDecoder feeds it, with the tapped hidden states of the target forwards a
// verifier runs, replayed on a cache of their own.
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/qwen35_model.h"
#include "common/engine/dflash_block_drafter.h"
#include "gtest/gtest.h"
#include "services/drafter/drafter_handler.h"
#include "specd/v1/drafter.pb.h"
#include "tests/unit/common/engine/engine_fixture.h"

namespace specd::drafter::testing {

inline v1::DraftRequest DraftRequestFor(const std::string& session_id,
                                        const v1::TensorHandle& context, int64_t anchor) {
  v1::DraftRequest request;
  request.set_session_id(session_id);
  *request.mutable_context() = context;
  request.set_anchor_token_id(static_cast<uint32_t>(anchor));
  return request;
}

// A handler serving the dflash-tiny-a drafter for `target`; null, failing the test, if refused.
inline std::unique_ptr<DrafterHandler> MakeDrafter(const model::Qwen35Model& target,
                                                   const DrafterOptions& options) {
  absl::StatusOr<model::DFlashDrafter> drafter = engine::testing::FixtureDrafter();
  EXPECT_TRUE(drafter.ok()) << drafter.status();
  if (!drafter.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<DrafterHandler>> handler =
      DrafterHandler::Create(*std::move(drafter), target.token_head(), target.config(), options);
  EXPECT_TRUE(handler.ok()) << handler.status();
  return handler.ok() ? *std::move(handler) : nullptr;
}

// The dflash-tiny-a drafter in process, for `target`.
inline std::unique_ptr<engine::DFlashBlockDrafter> InProcessDrafter(
    const model::Qwen35Model& target, const engine::DFlashBlockOptions& options) {
  absl::StatusOr<model::DFlashDrafter> drafter = engine::testing::FixtureDrafter();
  EXPECT_TRUE(drafter.ok()) << drafter.status();
  if (!drafter.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<engine::DFlashBlockDrafter>> block =
      engine::DFlashBlockDrafter::Create(*std::move(drafter), target.token_head(), target.config(),
                                       options);
  EXPECT_TRUE(block.ok()) << block.status();
  return block.ok() ? *std::move(block) : nullptr;
}

// One sequence drafted in process: the target prefills the prompt and runs each verify block on
// its own cache, and `drafter` is started on and committed the positions the verifier keeps.
class InProcessDrafting {
 public:
  // `target` and `drafter` must outlive this object.
  InProcessDrafting(const model::Qwen35Model& target, engine::BlockDrafter& drafter)
      : target_(target), drafter_(drafter) {}

  absl::Status Start(const std::vector<int64_t>& prompt, int64_t max_length) {
    absl::StatusOr<model::Qwen35Cache> cache = target_.NewCache(max_length);
    if (!cache.ok()) return cache.status();
    cache_.emplace(*std::move(cache));
    absl::StatusOr<model::ForwardOutput> prefill = target_.Prefill(
        prompt, *cache_,
        {.logit_rows = model::LogitRows::kLast, .hidden_states = drafter_.TargetHiddenStates()});
    if (!prefill.ok()) return prefill.status();
    return drafter_.Start({.ids = prompt, .hidden_states = prefill->hidden_states}, max_length);
  }

  absl::StatusOr<std::vector<int64_t>> Propose(int64_t anchor, int64_t max_tokens) {
    return drafter_.Propose(anchor, max_tokens);
  }

  // Runs the block a Verify ran (its anchor, then the drafts) and commits its first `committed`
  // positions, as the verifier did.
  absl::Status Commit(const std::vector<int64_t>& block, int64_t committed) {
    absl::StatusOr<model::ForwardOutput> verify = target_.ForwardBlock(
        block, *cache_,
        {.logit_rows = model::LogitRows::kAll, .hidden_states = drafter_.TargetHiddenStates()});
    if (!verify.ok()) return verify.status();
    if (absl::Status rolled = cache_->Rollback(committed); !rolled.ok()) return rolled;
    std::vector<at::Tensor> rows;
    for (const at::Tensor& state : verify->hidden_states)
      rows.push_back(state.narrow(0, 0, committed));
    return drafter_.Commit(
        {.ids = std::span(block).first(static_cast<size_t>(committed)), .hidden_states = rows});
  }

 private:
  const model::Qwen35Model& target_;
  engine::BlockDrafter& drafter_;
  std::optional<model::Qwen35Cache> cache_;
};

}  // namespace specd::drafter::testing
