// specd generate: decoding of a prompt (text or token ids) by the target alone, or speculatively
// with a drafter (--drafter), streaming the text as it comes, with the timings that speculative
// decoding is measured against.
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/specd/commands.h"
#include "cli/specd/model_options_flags.h"
#include "cli/specd/token_id_list.h"
#include "common/engine/drafter_factory.h"
#include "common/engine/generator.h"
#include "common/model/qwen35_model.h"
#include "common/text/tokenizer.h"
#include "nlohmann/json.hpp"

namespace specd::cli {
namespace {

constexpr char kCachedTokenizer[] = ".cache/tokenizer/qwen3/tokenizer.json";

struct GenerateFlags {
  std::string model;
  std::string prompt;
  std::string ids;
  std::string tokenizer;
  int64_t max_new_tokens = 0;
  double temperature = 0;
  double top_p = 1;
  int64_t top_k = 0;
  uint64_t seed = 0;
  bool ignore_eos = false;
  std::vector<std::string> stop;
  std::string format = "text";
  std::string drafter;  // empty: target-only
  int64_t block_size = 0;
  int64_t draft_window = 0;
  bool speculation_guard = true;
  bool rejection_sampling = false;
  int64_t logprobs = -1;              // -1: none
  model::ModelOptions model_options;  // AddModelOptions' flags
};

struct TokenizerSource {
  std::filesystem::path path;
  // The cached Qwen3 tokenizer rather than one given for this model: it may not know every id
  // the model can produce.
  bool borrowed = false;
};

// --tokenizer, else the model's own tokenizer.json, else the one scripts/setup.sh caches;
// nullopt when there is none.
std::optional<TokenizerSource> FindTokenizer(const GenerateFlags& flags) {
  if (std::optional<std::filesystem::path> path =
          text::Tokenizer::FileFor(flags.model, flags.tokenizer)) {
    return TokenizerSource{.path = *std::move(path), .borrowed = false};
  }
  if (std::filesystem::exists(kCachedTokenizer)) {
    return TokenizerSource{.path = kCachedTokenizer, .borrowed = true};
  }
  return std::nullopt;
}

absl::StatusOr<std::vector<int64_t>> PromptIds(const GenerateFlags& flags,
                                               const text::Tokenizer* tokenizer,
                                               int64_t model_vocab) {
  if (!flags.ids.empty()) return ParseIdList(flags.ids, "--ids");
  if (tokenizer == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("--prompt needs a tokenizer: pass --tokenizer FILE, put tokenizer.json in ",
                     flags.model, ", or run scripts/setup.sh to cache ", kCachedTokenizer));
  }
  absl::StatusOr<std::vector<text::TokenId>> encoded = tokenizer->Encode(flags.prompt);
  if (!encoded.ok()) return encoded.status();
  std::vector<int64_t> ids(encoded->begin(), encoded->end());
  for (const int64_t id : ids) {
    if (id >= model_vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("the tokenizer gives id ", id, ", outside the model's vocabulary of ",
                       model_vocab, " (the tokenizer does not belong to this model; use --ids)"));
    }
  }
  return ids;
}

void PrintJson(const engine::GenerationResult& result, bool has_text) {
  const engine::GenerationTimings& t = result.timings;
  nlohmann::json out = {{"ids", result.ids},
                        {"text", has_text ? nlohmann::json(result.text) : nlohmann::json(nullptr)},
                        {"stop_reason", engine::StopReasonName(result.stop_reason)},
                        {"timings",
                         {{"prefill_ms", t.prefill_ms},
                          {"decode_ms_per_token", t.decode_ms_per_token},
                          {"total_ms", t.total_ms},
                          {"tokens_per_s", t.tokens_per_s}}}};
  if (!result.logprobs.empty()) {
    nlohmann::json logprobs = nlohmann::json::array();
    for (const engine::TokenLogprob& token : result.logprobs) {
      nlohmann::json top = nlohmann::json::array();
      for (const auto& [id, logprob] : token.top) top.push_back({{"id", id}, {"logprob", logprob}});
      logprobs.push_back({{"id", token.token}, {"logprob", token.logprob}, {"top", top}});
    }
    out["logprobs"] = logprobs;
  }
  if (result.acceptance.has_value()) {
    out["acceptance_lengths"] = result.acceptance->acceptance_lengths;
    out["tau"] = result.acceptance->tau();
  }
  std::cout << out.dump() << "\n";
}

absl::Status Generate(const GenerateFlags& flags) {
  absl::StatusOr<model::Qwen35Model> target =
      model::Qwen35Model::Load(flags.model, flags.model_options);
  if (!target.ok()) return target.status();
  const int64_t vocab = target->config().vocab_size;
  std::unique_ptr<text::Tokenizer> tokenizer;
  bool detokenize = false;  // the output is text as well as ids
  if (const std::optional<TokenizerSource> source = FindTokenizer(flags)) {
    absl::StatusOr<text::Tokenizer> loaded = text::Tokenizer::FromFile(source->path);
    if (!loaded.ok()) return loaded.status();
    tokenizer = std::make_unique<text::Tokenizer>(*std::move(loaded));
    detokenize = !source->borrowed || tokenizer->vocab_size() >= vocab;
  }
  absl::StatusOr<std::vector<int64_t>> prompt = PromptIds(flags, tokenizer.get(), vocab);
  if (!prompt.ok()) return prompt.status();

  engine::GenerationRequest request{.prompt = *std::move(prompt),
                                    .sampling = {.temperature = flags.temperature,
                                                 .top_k = flags.top_k,
                                                 .top_p = flags.top_p,
                                                 .seed = flags.seed},
                                    .stop = {.max_new_tokens = flags.max_new_tokens,
                                             .eos_ids = target->config().eos_token_ids,
                                             .stop_strings = flags.stop,
                                             .ignore_eos = flags.ignore_eos},
                                    .top_logprobs = flags.logprobs};
  const bool text_output = flags.format == "text";
  const text::Tokenizer* output_tokenizer = detokenize ? tokenizer.get() : nullptr;
  const engine::ChunkCallback stream = [&](const engine::GenerationChunk& chunk) {
    if (text_output && detokenize) std::cout << chunk.text << std::flush;
  };
  std::unique_ptr<engine::Drafter> drafter;
  absl::StatusOr<engine::Generator> generator = engine::Generator(*target, output_tokenizer);
  if (!flags.drafter.empty()) {
    absl::StatusOr<std::unique_ptr<engine::Drafter>> opened =
        engine::OpenDrafter(flags.drafter, *target, flags.block_size);
    if (!opened.ok()) return opened.status();
    drafter = *std::move(opened);
    generator = engine::Generator::Speculative(*target, *drafter, output_tokenizer,
                                               {.block_size = flags.block_size,
                                                .window = flags.draft_window,
                                                .min_confidence = 0,
                                                .rejection_sampling = flags.rejection_sampling},
                                               {}, flags.speculation_guard);
    if (!generator.ok()) return generator.status();
  }
  absl::StatusOr<engine::GenerationResult> result = generator->Generate(request, stream);
  if (!result.ok()) return result.status();

  if (!text_output) {
    PrintJson(*result, detokenize);
    return absl::OkStatus();
  }
  std::cout << (detokenize ? "" : absl::StrJoin(result->ids, " ")) << "\n";
  const engine::GenerationTimings& t = result->timings;
  std::cerr << result->ids.size() << " tokens (" << engine::StopReasonName(result->stop_reason)
            << "): prefill " << t.prefill_ms << " ms, decode " << t.decode_ms_per_token
            << " ms/token, " << t.tokens_per_s << " tokens/s";
  if (result->acceptance.has_value()) std::cerr << ", tau " << result->acceptance->tau();
  std::cerr << "\n";
  return absl::OkStatus();
}

}  // namespace

void AddGenerateCommand(CLI::App& app) {
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* command = app.add_subcommand(
      "generate", "Generate a continuation with the target model, alone or with a drafter");
  command->add_option("--model", flags->model, "Checkpoint directory (config.json + safetensors)")
      ->required();
  AddModelOptions(*command, flags->model_options);
  CLI::Option* prompt = command->add_option("--prompt", flags->prompt, "Prompt text");
  CLI::Option* ids = command->add_option("--ids", flags->ids, "Prompt token ids, e.g. 1,2,3");
  prompt->excludes(ids);
  command->add_option("--tokenizer", flags->tokenizer,
                      absl::StrCat("tokenizer.json (default: the model's, else ./",
                                   kCachedTokenizer, " if it exists)"));
  command->add_option("--max-new-tokens", flags->max_new_tokens, "Tokens to generate at most")
      ->required()
      ->check(CLI::PositiveNumber);
  command->add_option("--temperature", flags->temperature, "0 picks the most likely token")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command->add_option("--top-p", flags->top_p, "Nucleus sampling threshold")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  command->add_option("--top-k", flags->top_k, "Keep the k most likely tokens; 0 keeps all")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command->add_option("--seed", flags->seed, "Seed of the request's random stream")
      ->capture_default_str();
  command->add_flag("--ignore-eos", flags->ignore_eos, "Keep going past end-of-sequence tokens");
  command->add_option("--stop", flags->stop, "Stop before this text (repeatable)");
  command
      ->add_option("--format", flags->format,
                   "text streams the text (or prints the ids) with timings on stderr; json prints "
                   "{\"ids\", \"text\", \"stop_reason\", \"timings\"}")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  command
      ->add_option("--logprobs", flags->logprobs,
                   "json adds \"logprobs\": each token's log-probability under the target with "
                   "this many most likely alternatives (0: none)")
      ->check(CLI::Range(int64_t{0}, int64_t{20}));
  CLI::Option* drafter = command->add_option(
      "--drafter", flags->drafter,
      "Decode speculatively with this DFlash drafter checkpoint directory, \"suffix\" (the "
      "text's own earlier continuations), \"suffix+DIR\" (both, the one expected to be accepted "
      "longer each step) or \"oracle\" (the target's own greedy continuation); json adds "
      "acceptance_lengths and tau");
  command
      ->add_option("--block-size", flags->block_size,
                   "Tokens per verify block with --drafter (default: the drafter's)")
      ->check(CLI::Range(int64_t{1}, std::numeric_limits<int64_t>::max()))
      ->needs(drafter);
  command
      ->add_flag("--speculation-guard,!--no-speculation-guard", flags->speculation_guard,
                 "With --drafter: pick each step's block (up to --block-size) by measured cost "
                 "and acceptance, 1 when speculation does not pay (default: on)")
      ->needs(drafter);
  command
      ->add_flag("--rejection-sampling", flags->rejection_sampling,
                 "With --drafter and --temperature > 0: draw the drafts from the drafter's "
                 "distribution and accept them with probability min(1, p/q) (more accepted, the "
                 "same distribution; a seed's tokens then depend on the blocks) rather than match "
                 "its most likely tokens against the target's draw")
      ->needs(drafter);
  command
      ->add_option(
          "--draft-window", flags->draft_window,
          "Sliding attention window of the drafter, in tokens (default: the one it was trained "
          "for, if any)")
      ->check(CLI::NonNegativeNumber)
      ->needs(drafter);
  command->callback([command, flags, prompt, ids] {
    RunOrExit(*command, [&] {
      if (prompt->empty() && ids->empty()) {
        return absl::InvalidArgumentError("give --prompt TEXT or --ids 1,2,3");
      }
      return Generate(*flags);
    });
  });
}

}  // namespace specd::cli
