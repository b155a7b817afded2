// specd bench spec: speculative decoding against the target alone on the three regimes
// (short 64 → 128, medium 2048 → 256, long 8192 → 256 prompt → new tokens, scalable), greedy on
// random prompts: decode tokens/s of both, τ, the speedup, and what a drafting and a verify step
// cost in target decode steps: full blocks, and blocks the speculation guard picks (one guard for
// every run, as a server keeps one). With --min-confidence the adaptive draft length runs beside
// them. Each measurement is the fastest of a few runs. With --force-tau every block accepts the
// same number of tokens (forced_acceptance_drafter.h), the engine's speed at that acceptance.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/specd/commands.h"
#include "cli/specd/model_options_flags.h"
#include "common/engine/drafter_factory.h"
#include "common/engine/forced_acceptance_drafter.h"
#include "common/engine/generator.h"
#include "common/engine/regime.h"
#include "common/model/qwen35_model.h"

namespace specd::cli {
namespace {

struct SpecBenchFlags {
  std::string model;
  std::string drafter;
  int64_t block_size = 0;
  int64_t draft_window = 0;
  double min_confidence = 0;
  int64_t force_tau = 0;  // 0: the drafter's own proposals
  double scale = 1;
  std::vector<int64_t> prompt_lengths;  // overrides, one per regime
  std::vector<int64_t> new_tokens;
  uint64_t seed = 0;
  int64_t repeats = 3;
  model::ModelOptions model_options;  // AddModelOptions' flags
};

engine::GenerationRequest GreedyRequest(int64_t prompt_length, int64_t new_tokens, int64_t vocab,
                                        uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<int64_t> token(0, vocab - 1);
  engine::GenerationRequest request{.prompt = std::vector<int64_t>(prompt_length),
                                    .sampling = {},
                                    .stop = {.max_new_tokens = new_tokens,
                                             .eos_ids = {},
                                             .stop_ids = {},
                                             .stop_strings = {},
                                             .ignore_eos = true}};
  for (int64_t& id : request.prompt) id = token(random);
  return request;
}

// The workloads to run: the nominal ones scaled, or as overridden.
std::vector<engine::RegimeWorkload> Workloads(const SpecBenchFlags& flags) {
  std::vector<engine::RegimeWorkload> workloads = engine::NominalWorkloads();
  for (size_t i = 0; i < workloads.size(); ++i) {
    engine::RegimeWorkload& w = workloads[i];
    const auto scaled = [&](int64_t n) {
      return std::max<int64_t>(1, std::llround(static_cast<double>(n) * flags.scale));
    };
    w.prompt_tokens =
        flags.prompt_lengths.empty() ? scaled(w.prompt_tokens) : flags.prompt_lengths[i];
    w.new_tokens = flags.new_tokens.empty() ? scaled(w.new_tokens) : flags.new_tokens[i];
  }
  return workloads;
}

// The run with the fastest decode of `repeats` (on a shared machine the others met contention).
absl::StatusOr<engine::GenerationResult> Fastest(const engine::Generator& decoder,
                                                 const engine::GenerationRequest& request,
                                                 int64_t repeats) {
  absl::StatusOr<engine::GenerationResult> best = decoder.Generate(request);
  for (int64_t i = 1; i < repeats && best.ok(); ++i) {
    absl::StatusOr<engine::GenerationResult> run = decoder.Generate(request);
    if (!run.ok() || run->timings.decode_ms_per_token < best->timings.decode_ms_per_token) {
      best = std::move(run);
    }
  }
  return best;
}

double DecodeTokensPerSecond(const engine::GenerationResult& result) {
  const double ms = result.timings.decode_ms_per_token;
  return ms > 0 ? 1000 / ms : 0;
}

// One speculative column: decode speed, τ, speedup and per-step costs in target decode steps.
void PrintSpeculative(const char* label, const engine::GenerationResult& spec,
                      const engine::GenerationResult& target) {
  const engine::AcceptanceStats& stats = *spec.acceptance;
  const double steps = std::max<double>(1, static_cast<double>(stats.steps()));
  const double decode_ms = target.timings.decode_ms_per_token;
  std::printf(
      "  %-9s %9.1f tok/s  tau %5.2f  speedup %5.2fx  draft %7.2f ms/step (%5.2f decode)"
      "  verify %7.2f ms/step (%5.2f decode)  total %.1f ms  %s\n",
      label, DecodeTokensPerSecond(spec), stats.tau(),
      DecodeTokensPerSecond(spec) / DecodeTokensPerSecond(target), stats.draft_ms / steps,
      stats.draft_ms / steps / decode_ms, stats.verify_ms / steps,
      stats.verify_ms / steps / decode_ms, spec.timings.total_ms,
      spec.ids == target.ids ? "same ids" : "IDS DIFFER");
}

// The speculative columns of one workload, drafting with `drafter`.
absl::Status RunSpeculative(const SpecBenchFlags& flags, const model::Qwen35Model& target,
                            const engine::Drafter& drafter,
                            const engine::GenerationRequest& request,
                            const engine::GenerationResult& alone) {
  engine::DraftOptions options{
      .block_size = flags.block_size, .window = flags.draft_window, .min_confidence = 0};
  absl::StatusOr<engine::Generator> speculative =
      engine::Generator::Speculative(target, drafter, nullptr, options);
  if (!speculative.ok()) return speculative.status();
  absl::StatusOr<engine::GenerationResult> spec = Fastest(*speculative, request, flags.repeats);
  if (!spec.ok()) return spec.status();
  PrintSpeculative("fixed", *spec, alone);
  absl::StatusOr<engine::Generator> guarded =
      engine::Generator::Speculative(target, drafter, nullptr, options, {}, /*guarded=*/true);
  if (!guarded.ok()) return guarded.status();
  absl::StatusOr<engine::GenerationResult> chosen = Fastest(*guarded, request, flags.repeats);
  if (!chosen.ok()) return chosen.status();
  PrintSpeculative("guarded", *chosen, alone);
  if (flags.min_confidence > 0) {
    options.min_confidence = flags.min_confidence;
    absl::StatusOr<engine::Generator> adaptive =
        engine::Generator::Speculative(target, drafter, nullptr, options);
    if (!adaptive.ok()) return adaptive.status();
    absl::StatusOr<engine::GenerationResult> cut = Fastest(*adaptive, request, flags.repeats);
    if (!cut.ok()) return cut.status();
    PrintSpeculative("adaptive", *cut, alone);
  }
  return absl::OkStatus();
}

absl::Status BenchSpec(const SpecBenchFlags& flags) {
  absl::StatusOr<model::Qwen35Model> target =
      model::Qwen35Model::Load(flags.model, flags.model_options);
  if (!target.ok()) return target.status();
  const int64_t vocab = target->config().vocab_size;
  absl::StatusOr<std::unique_ptr<engine::Drafter>> drafter =
      engine::OpenDrafter(flags.drafter, *target, flags.block_size);
  if (!drafter.ok()) return drafter.status();
  const engine::Generator baseline(*target, nullptr);

  std::printf(
      "model    %s\ndrafter  %s, block %lld, window %lld", flags.model.c_str(),
      flags.drafter.c_str(),
      static_cast<long long>(flags.block_size > 0 ? flags.block_size : (*drafter)->block_size()),
      static_cast<long long>(flags.draft_window));
  if (flags.force_tau > 0) {
    std::printf(", acceptance forced to tau %lld", static_cast<long long>(flags.force_tau));
  }
  std::printf("\n");
  // Pages the mapped weights of both models in before anything is timed.
  absl::StatusOr<engine::Generator> warm_up = engine::Generator::Speculative(
      *target, **drafter, nullptr,
      {.block_size = flags.block_size, .window = flags.draft_window, .min_confidence = 0});
  if (!warm_up.ok()) return warm_up.status();
  if (absl::StatusOr<engine::GenerationResult> warm =
          warm_up->Generate(GreedyRequest(8, 4, vocab, flags.seed));
      !warm.ok()) {
    return warm.status();
  }
  for (const engine::RegimeWorkload& workload : Workloads(flags)) {
    const engine::GenerationRequest request =
        GreedyRequest(workload.prompt_tokens, workload.new_tokens, vocab, flags.seed);
    absl::StatusOr<engine::GenerationResult> alone = Fastest(baseline, request, flags.repeats);
    if (!alone.ok()) return alone.status();
    std::printf(
        "%-6s %lld → %lld tokens\n  %-9s %9.1f tok/s  (%.2f ms/token, prefill %.1f ms,"
        " total %.1f ms)\n",
        engine::RegimeName(workload.regime), static_cast<long long>(workload.prompt_tokens),
        static_cast<long long>(workload.new_tokens), "target", DecodeTokensPerSecond(*alone),
        alone->timings.decode_ms_per_token, alone->timings.prefill_ms, alone->timings.total_ms);
    if (flags.force_tau == 0) {
      if (absl::Status ran = RunSpeculative(flags, *target, **drafter, request, *alone);
          !ran.ok()) {
        return ran;
      }
      continue;
    }
    // The target's own continuation, which the forced drafts follow.
    std::vector<int64_t> reference = request.prompt;
    reference.insert(reference.end(), alone->ids.begin(), alone->ids.end());
    absl::StatusOr<std::unique_ptr<engine::ForcedAcceptanceDrafter>> forced =
        engine::ForcedAcceptanceDrafter::Create(**drafter, {std::move(reference)}, flags.force_tau,
                                                vocab);
    if (!forced.ok()) return forced.status();
    if (absl::Status ran = RunSpeculative(flags, *target, **forced, request, *alone); !ran.ok()) {
      return ran;
    }
  }
  return absl::OkStatus();
}

}  // namespace

void AddSpecBench(CLI::App& bench) {
  auto flags = std::make_shared<SpecBenchFlags>();
  CLI::App* command = bench.add_subcommand(
      "spec", "Speculative decoding against the target alone on the short/medium/long regimes");
  command->add_option("--model", flags->model, "Target checkpoint directory")->required();
  AddModelOptions(*command, flags->model_options);
  command
      ->add_option("--drafter", flags->drafter,
                   "A DFlash drafter checkpoint directory, \"suffix\" (the text's own earlier "
                   "continuations), \"suffix+DIR\" (both, step by step) or \"oracle\" (the "
                   "target's own greedy continuation: the ceiling τ = block size)")
      ->required();
  command
      ->add_option("--block-size", flags->block_size,
                   "Tokens per verify block (default: the drafter's; the oracle's and suffix's 16)")
      ->check(CLI::PositiveNumber);
  command
      ->add_option("--draft-window", flags->draft_window,
                   "Drafter attention window (0: the one it was trained for, if any)")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--min-confidence", flags->min_confidence,
                   "Also run the adaptive draft length, cutting blocks below this draft "
                   "probability")
      ->check(CLI::Range(0.0, 1.0));
  command
      ->add_option("--force-tau", flags->force_tau,
                   "Force every block to accept this many tokens (the target's own next token "
                   "included): the drafter runs in full, then its first N-1 drafts are replaced by "
                   "the target's greedy tokens and the Nth by another, to measure the engine at a "
                   "given acceptance whatever the drafter")
      ->check(CLI::PositiveNumber);
  CLI::Option* scale =
      command
          ->add_option("--scale", flags->scale,
                       "Multiply the regimes' prompt and new token counts (e.g. 0.1 on a CPU)")
          ->capture_default_str()
          ->check(CLI::PositiveNumber);
  command
      ->add_option("--prompt-lens", flags->prompt_lengths,
                   "Prompt tokens of short,medium,long (instead of 64,2048,8192 × scale)")
      ->delimiter(',')
      ->expected(3)
      ->check(CLI::PositiveNumber)
      ->excludes(scale);
  command
      ->add_option("--new-tokens", flags->new_tokens,
                   "New tokens of short,medium,long (instead of 128,256,256 × scale)")
      ->delimiter(',')
      ->expected(3)
      ->check(CLI::PositiveNumber)
      ->excludes(scale);
  command->add_option("--seed", flags->seed, "Seed of the random prompts")->capture_default_str();
  command->add_option("--repeats", flags->repeats, "Runs of each measurement; the fastest counts")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->callback([command, flags] { RunOrExit(*command, [&] { return BenchSpec(*flags); }); });
}

}  // namespace specd::cli
