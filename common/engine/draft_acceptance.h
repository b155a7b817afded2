#pragma once
// The "sample and match" rule (research/dflash.md §3) on one verify forward, shared by the
// in-process engine and the target-verifier service so that both accept exactly alike.
//
// Row i of `logits` is the target's next-token distribution after block[i] (block[0] is the
// anchor). The target's token there is drawn with `sampler` (penalties over the prompt and the
// output so far) and emitted; draft block[i + 1] is accepted while it equals that token. A token
// that ends the output ends the step as its own token, never as an accepted draft, so a step
// always emits its accepted drafts plus one token.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/sampling.h"

namespace specd::engine {

// Appends an emitted token to the output `generated` refers to; true when it ended the output.
using EmitToken = std::function<absl::StatusOr<bool>(int64_t token)>;

// The number of accepted drafts; accepted + 1 tokens were emitted.
absl::StatusOr<int64_t> AcceptDrafts(const at::Tensor& logits, std::span<const int64_t> block,
                                     model::Sampler& sampler, std::span<const int64_t> prompt,
                                     const std::vector<int64_t>& generated, const EmitToken& emit);

}  // namespace specd::engine
