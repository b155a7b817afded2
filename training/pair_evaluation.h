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
};

absl::StatusOr<SpeculativeEvaluation> EvaluateSpeculative(
    const model::Qwen35Model& target, const std::filesystem::path& drafter,
    const std::vector<std::vector<int64_t>>& prompts, const EvaluationOptions& options);

// Decode tokens per second of the target alone and with `drafter` on the same prompts, run in
// alternation (plain, speculative, plain, … for `rounds` passes) so that a noisy machine slows
// both alike.
struct SpeedComparison {
  double plain_tokens_per_s = 0;
  double speculative_tokens_per_s = 0;
};
absl::StatusOr<SpeedComparison> CompareSpeeds(const model::Qwen35Model& target,
                                              const std::filesystem::path& drafter,
                                              const std::vector<std::vector<int64_t>>& prompts,
                                              const EvaluationOptions& options, int64_t rounds);

}  // namespace specd::train
