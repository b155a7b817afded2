#pragma once
// The contract's SamplingParams (types.proto) as the engine's model::SamplingParams: unset fields
// take the contract's built-in defaults, out-of-range values are INVALID_ARGUMENT naming the
// field, and fields the engine cannot honour yet are refused rather than ignored.
#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "common/engine/ports.h"
#include "common/engine/stop_criteria.h"
#include "common/model/sampling.h"
#include "specd/v1/types.pb.h"

namespace specd::verifier {

// Below this temperature decoding is greedy (types.proto).
inline constexpr double kGreedyTemperature = 1e-5;
// Most alternatives SamplingParams.top_logprobs may ask for (vLLM's default limit).
inline constexpr uint32_t kMaxTopLogprobs = 20;

// Every field, the seed included: params.seed, or a fresh draw when it is unset (the one place a
// served request's seed is drawn). `eos_ids` are the model's: with params.stop_token_ids (and
// unless ignore_eos), what min_new_tokens keeps out of the first tokens.
absl::StatusOr<model::SamplingParams> ToModelSampling(const v1::SamplingParams& params,
                                                      int64_t vocab_size,
                                                      std::span<const int64_t> eos_ids);

// The engine's top_logprobs: -1 when `params` asks for no log-probabilities.
int64_t TopLogprobsOf(const v1::SamplingParams& params);

// A token's log-probabilities between the contract and the engine.
v1::TokenLogprob ToProto(const engine::TokenLogprob& logprob);
engine::TokenLogprob FromProto(const v1::TokenLogprob& logprob);

}  // namespace specd::verifier
