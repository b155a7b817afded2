#pragma once
// How well a drafter serves a target, measured by the real engine: greedy speculative decoding
// of held-out prompts (lossless, so the output is the target's own) gives the mean acceptance
// length τ, the acceptance rate per block position and the speed; target-only decoding of the
// same prompts is the baseline speed.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/qwen35_model.h"

namespace specd::train {

struct EvaluationOptions {
  int64_t max_new_tokens = 64;  // per prompt, EOS ignored so every prompt decodes as many
  int64_t window = 0;           // the drafter's symmetric attention window; 0: none
};

struct SpeculativeEvaluation {
  double tau = 0;                              // tokens per verify step over all prompts
  std::vector<double> acceptance_by_position;  // [k − 1]: drafts at position k accepted
  double tokens_per_s = 0;                     // new tokens over decoding time, all prompts
  int64_t tokens = 0;
};

absl::StatusOr<SpeculativeEvaluation> EvaluateSpeculative(
    const model::Qwen35Model& target, const std::filesystem::path& drafter,
    const std::vector<std::vector<int64_t>>& prompts, const EvaluationOptions& options);

// Target-only tokens per second on the same prompts.
absl::StatusOr<double> EvaluatePlain(const model::Qwen35Model& target,
                                     const std::vector<std::vector<int64_t>>& prompts,
                                     const EvaluationOptions& options);

}  // namespace specd::train
