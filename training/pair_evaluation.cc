#include "training/pair_evaluation.h"

#include <memory>

#include "common/engine/drafter_factory.h"
#include "common/engine/generator.h"

namespace specd::train {
namespace {

engine::GenerationRequest GreedyRequest(const std::vector<int64_t>& prompt,
                                        const EvaluationOptions& options) {
  engine::GenerationRequest request;
  request.prompt = prompt;
  request.stop.max_new_tokens = options.max_new_tokens;
  request.stop.ignore_eos = true;
  return request;
}

// Tokens over seconds, the first token (the prompt's forward) left out of both as in
// GenerationTimings::decode_ms_per_token.
struct Throughput {
  double decode_ms = 0;
  int64_t tokens = 0;
  void Add(const engine::GenerationResult& result) {
    const int64_t after_first = static_cast<int64_t>(result.ids.size()) - 1;
    decode_ms += result.timings.decode_ms_per_token * static_cast<double>(after_first);
    tokens += after_first;
  }
  double TokensPerSecond() const { return decode_ms > 0 ? 1e3 * tokens / decode_ms : 0; }
};

}  // namespace

absl::StatusOr<SpeculativeEvaluation> EvaluateSpeculative(
    const model::Qwen35Model& target, const std::filesystem::path& drafter,
    const std::vector<std::vector<int64_t>>& prompts, const EvaluationOptions& options) {
  absl::StatusOr<std::unique_ptr<engine::Drafter>> opened =
      engine::OpenDrafter(drafter.string(), target);
  if (!opened.ok()) return opened.status();
  absl::StatusOr<engine::Generator> decoder = engine::Generator::Speculative(
      target, **opened, nullptr, {.block_size = 0, .window = options.window, .min_confidence = 0});
  if (!decoder.ok()) return decoder.status();
  engine::AcceptanceStats total;
  for (const std::vector<int64_t>& prompt : prompts) {
    absl::StatusOr<engine::GenerationResult> result =
        decoder->Generate(GreedyRequest(prompt, options));
    if (!result.ok()) return result.status();
    total.Merge(*result->acceptance);
  }
  SpeculativeEvaluation evaluation{.tau = total.tau(), .acceptance_by_position = {}};
  for (size_t i = 0; i < total.proposed_at.size(); ++i) {
    evaluation.acceptance_by_position.push_back(total.proposed_at[i] > 0
                                                    ? static_cast<double>(total.accepted_at[i]) /
                                                          static_cast<double>(total.proposed_at[i])
                                                    : 0.0);
  }
  return evaluation;
}

absl::StatusOr<SpeedComparison> CompareSpeeds(const model::Qwen35Model& target,
                                              const std::filesystem::path& drafter,
                                              const std::vector<std::vector<int64_t>>& prompts,
                                              const EvaluationOptions& options, int64_t rounds) {
  absl::StatusOr<std::unique_ptr<engine::Drafter>> opened =
      engine::OpenDrafter(drafter.string(), target);
  if (!opened.ok()) return opened.status();
  const engine::Generator plain(target, nullptr);
  absl::StatusOr<engine::Generator> speculative = engine::Generator::Speculative(
      target, **opened, nullptr, {.block_size = 0, .window = options.window, .min_confidence = 0});
  if (!speculative.ok()) return speculative.status();
  Throughput plain_speed, speculative_speed;
  for (int64_t round = 0; round < rounds; ++round) {
    for (const std::vector<int64_t>& prompt : prompts) {
      const engine::GenerationRequest request = GreedyRequest(prompt, options);
      absl::StatusOr<engine::GenerationResult> alone = plain.Generate(request);
      if (!alone.ok()) return alone.status();
      plain_speed.Add(*alone);
      absl::StatusOr<engine::GenerationResult> drafted = speculative->Generate(request);
      if (!drafted.ok()) return drafted.status();
      speculative_speed.Add(*drafted);
    }
  }
  return SpeedComparison{.plain_tokens_per_s = plain_speed.TokensPerSecond(),
                         .speculative_tokens_per_s = speculative_speed.TokensPerSecond()};
}

}  // namespace specd::train
