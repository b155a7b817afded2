#pragma once
// What the drafter service's tests share: drafter handlers, Draft requests, and in-process
// drafting to hold the service to: a session of engine::DFlashBlockDrafter fed the way the
// in-process draft port feeds it, with the tapped hidden states of the target forwards a
// verifier runs, replayed on a cache of their own.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/dflash_block_drafter.h"
#include "common/model/qwen35_model.h"
#include "gtest/gtest.h"
#include "services/drafter/drafter_handler.h"
#include "services/drafter/served_drafter.h"
#include "specd/v1/drafter.pb.h"
#include "tests/unit/common/engine/engine_fixture.h"
#include "tests/unit/services/verifier/verifier_fixture.h"

namespace specd::drafter::testing {

inline v1::DraftRequest DraftRequestFor(const std::string& session_id,
                                        const v1::TensorHandle& context, int64_t anchor) {
  v1::DraftRequest request;
  request.set_session_id(session_id);
  *request.mutable_context() = context;
  request.set_anchor_token_id(static_cast<uint32_t>(anchor));
  return request;
}

inline std::string FixtureDFlashDir() {
  return specd::testing::FixtureDir("dflash-tiny-a").string();
}

// `source` (served_drafter.h) opened for `target`.
inline absl::StatusOr<ServedDrafter> OpenDrafter(const model::Qwen35Model& target,
                                                 const std::string& source) {
  return OpenServedDrafter(
      source, target.config(), target.options(),
      [&]() -> absl::StatusOr<model::TokenHead> { return target.token_head(); });
}

// A handler serving `source` (by default the dflash-tiny-a drafter) for `target`; null, failing
// the test, if refused.
inline std::unique_ptr<DrafterHandler> MakeDrafter(const model::Qwen35Model& target,
                                                   const DrafterOptions& options,
                                                   const std::string& source = FixtureDFlashDir()) {
  absl::StatusOr<ServedDrafter> drafter = OpenDrafter(target, source);
  EXPECT_TRUE(drafter.ok()) << drafter.status();
  if (!drafter.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<DrafterHandler>> handler =
      DrafterHandler::Create(*std::move(drafter), target.config(), options);
  EXPECT_TRUE(handler.ok()) << handler.status();
  return handler.ok() ? *std::move(handler) : nullptr;
}

// The dflash-tiny-a drafter in process, for `target`, drafting with `options`.
inline engine::testing::Drafting InProcessDrafter(const model::Qwen35Model& target,
                                                  const engine::DraftOptions& options) {
  absl::StatusOr<model::DFlashDrafter> drafter = engine::testing::FixtureDrafter();
  EXPECT_TRUE(drafter.ok()) << drafter.status();
  if (!drafter.ok()) return {};
  absl::StatusOr<std::unique_ptr<engine::DFlashBlockDrafter>> block =
      engine::DFlashBlockDrafter::Create(*std::move(drafter), target.token_head(), target.config());
  EXPECT_TRUE(block.ok()) << block.status();
  if (!block.ok()) return {};
  absl::StatusOr<engine::DraftOptions> resolved = (*block)->Resolve(options);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return {.drafter = *std::move(block), .options = resolved.ok() ? *resolved : options};
}

// One sequence drafted in process: the target prefills the prompt and runs each verify block on
// its own cache, and a session of `drafting` takes in the positions the verifier keeps.
class InProcessDrafting {
 public:
  // `target` and `drafting` must outlive this object.
  InProcessDrafting(const model::Qwen35Model& target, const engine::testing::Drafting& drafting)
      : target_(target), drafting_(drafting) {}

  absl::Status Start(const std::vector<int64_t>& prompt, int64_t max_length) {
    absl::StatusOr<model::Qwen35Cache> cache = target_.NewCache(max_length);
    if (!cache.ok()) return cache.status();
    cache_.emplace(*std::move(cache));
    absl::StatusOr<model::ForwardOutput> prefill = target_.Prefill(
        prompt, *cache_, {.logit_rows = model::LogitRows::kLast, .hidden_states = Taps()});
    if (!prefill.ok()) return prefill.status();
    absl::StatusOr<std::unique_ptr<engine::DraftSession>> session =
        drafting_.drafter->OpenSession(max_length);
    if (!session.ok()) return session.status();
    session_ = *std::move(session);
    return session_->Append(
        {.begin = 0, .ids = prompt, .rows = at::cat(prefill->hidden_states, /*dim=*/1)});
  }

  absl::StatusOr<std::vector<int64_t>> Propose(int64_t anchor, int64_t max_tokens) {
    absl::StatusOr<engine::DraftProposal> proposal = session_->Propose(
        anchor, std::min(drafting_.options.block_size - 1, max_tokens), drafting_.options,
        /*report_confidence=*/false);
    if (!proposal.ok()) return proposal.status();
    return proposal->tokens;
  }

  // Runs the block a Verify ran (its anchor, then the drafts) and commits its first `committed`
  // positions, as the verifier did.
  absl::Status Commit(const std::vector<int64_t>& block, int64_t committed) {
    const int64_t begin = cache_->length();
    absl::StatusOr<model::ForwardOutput> verify = target_.ForwardBlock(
        block, *cache_, {.logit_rows = model::LogitRows::kAll, .hidden_states = Taps()});
    if (!verify.ok()) return verify.status();
    if (absl::Status rolled = cache_->Rollback(committed); !rolled.ok()) return rolled;
    return session_->Append(
        {.begin = begin,
         .ids = std::vector<int64_t>(block.begin(), block.begin() + committed),
         .rows = at::cat(verify->hidden_states, /*dim=*/1).narrow(0, 0, committed)});
  }

 private:
  std::vector<int64_t> Taps() const { return drafting_.drafter->TargetHiddenStates(); }

  const model::Qwen35Model& target_;
  const engine::testing::Drafting& drafting_;
  std::optional<model::Qwen35Cache> cache_;
  std::unique_ptr<engine::DraftSession> session_;
};

// A verifier's session "s" and in-process drafting of the same sequence, stepped together: what
// the verifier keeps of each block is committed in process too, so that in-process proposals can
// be held against the service's at every step.
class VerifiedDrafting {
 public:
  // All three must outlive this object.
  VerifiedDrafting(verifier::VerifierHandler& verifier, const model::Qwen35Model& target,
                   const engine::testing::Drafting& drafting)
      : verifier_(verifier), in_process_(target, drafting) {}

  absl::Status Start(const std::vector<int64_t>& prompt, int64_t max_length) {
    if (absl::Status started = in_process_.Start(prompt, max_length); !started.ok()) {
      return started;
    }
    absl::StatusOr<v1::PrefillResponse> prefill =
        verifier_.Prefill(verifier::testing::PrefillRequestFor("s", prompt));
    if (!prefill.ok()) return prefill.status();
    committed_ = prompt;
    context_ = prefill->context();
    anchor_ = prefill->next_token_id();
    generation_ = prefill->generation();
    return absl::OkStatus();
  }

  // What in-process drafting proposes after the anchor.
  absl::StatusOr<std::vector<int64_t>> Propose(int64_t max_tokens) {
    return in_process_.Propose(anchor_, max_tokens);
  }

  // Verifies `drafts` after the anchor, then holds the verifier's next token as the anchor.
  absl::Status Verify(const std::vector<int64_t>& drafts) {
    absl::StatusOr<v1::VerifyResponse> verify =
        verifier_.Verify(verifier::testing::VerifyRequestFor("s", generation_, drafts));
    if (!verify.ok()) return verify.status();
    std::vector<int64_t> block = {anchor_};
    block.insert(block.end(), drafts.begin(), drafts.end());
    const int64_t kept = verify->accepted_token_ids_size() + 1;
    if (absl::Status committed = in_process_.Commit(block, kept); !committed.ok()) {
      return committed;
    }
    committed_.insert(committed_.end(), block.begin(), block.begin() + kept);
    context_ = verify->context();
    anchor_ = verify->next_token_id();
    generation_ = verify->generation();
    return absl::OkStatus();
  }

  // The ids of the committed positions: the prompt, then each step's anchor and accepted drafts.
  const std::vector<int64_t>& committed() const { return committed_; }
  // The verifier's newest context handle and the token it emitted last.
  const v1::TensorHandle& context() const { return context_; }
  int64_t anchor() const { return anchor_; }

 private:
  verifier::VerifierHandler& verifier_;
  InProcessDrafting in_process_;
  std::vector<int64_t> committed_;
  v1::TensorHandle context_;
  int64_t anchor_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace specd::drafter::testing
