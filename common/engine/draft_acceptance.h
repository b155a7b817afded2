#pragma once
// The acceptance rules on one verify forward, shared by the in-process engine and the
// target-verifier service so that both accept exactly alike: sample and match (research/dflash.md
// §3) and rejection sampling (Leviathan et al., "Fast Inference from Transformers via
// Speculative Decoding", 2023, §2.3).
//
// Row i of `logits` is the target's next-token distribution p_i after block[i] (block[0] is the
// anchor), processed by `sampler` (penalties over the prompt and the output so far, temperature,
// truncations).
// - Sample and match (drafts without distributions): the target's token at row i is drawn from
//   p_i and emitted; draft block[i + 1] is accepted while it equals that token. A seed gives
//   target-only decoding's tokens exactly.
// - Rejection sampling (each draft with the distribution q_i it was drawn from; sampled
//   requests): draft x = block[i + 1] is accepted with probability min(1, p_i(x) / q_i(x));
//   the first one rejected is replaced by a draw from the residual max(0, p_i − q_i), normalised.
//   Each emitted token is distributed as p_i, and a draft is accepted with probability
//   1 − TV(p_i, q_i), against p_i(x) for matching the drafter's most likely token x.
// After the last draft the target draws its own token. A token that ends the output ends the step
// as its own token, never as an accepted draft, so a step always emits its accepted drafts plus
// one token.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/ports.h"
#include "common/model/sampling.h"

namespace specd::engine {

// Appends an emitted token to the output `generated` refers to; true when it ended the output.
using EmitToken = std::function<absl::StatusOr<bool>(int64_t token)>;

// The number of accepted drafts; accepted + 1 tokens were emitted. `distributions` is empty or
// holds one per draft (checked by CheckDraftDistributions); a greedy sampler matches either way.
// `most_likely`: the logits rows' argmax where already read (model::ForwardOutput).
absl::StatusOr<int64_t> AcceptDrafts(const at::Tensor& logits, std::span<const int64_t> block,
                                     std::span<const DraftDistribution> distributions,
                                     model::Sampler& sampler, std::span<const int64_t> prompt,
                                     const std::vector<int64_t>& generated, const EmitToken& emit,
                                     std::span<const int64_t> most_likely = {});

// OK when `drafts` has no distributions or one per token, each a distribution over distinct ids of
// a vocabulary of `vocab_size` that gives its token some probability.
absl::Status CheckDraftDistributions(const Drafts& drafts, int64_t vocab_size);

}  // namespace specd::engine
