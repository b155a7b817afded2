// specd train STAGE --config FILE.yaml: one training stage, every hyper-parameter a YAML key with
// the paper's value as its default (research/dflash.md §4–§6); runs resume from their state.
//   pack          conversations or texts (JSONL) → packed token shards with a loss mask
//   regenerate    answers of a teacher to the prompts of a conversations JSONL
//   pretrain      a Qwen3.5-architecture model from scratch on packed text
//   qad           quantization-aware distillation of a W4A16 target from its dense teacher
//   drafter       a DFlash drafter on a frozen target (stage 1 or 2: `init` says where from)
//   gptq-drafter  GPTQ W4A16 of a drafter, calibrated through the target
//   quantize      W4A16 of a dense target (AWQ or RTN), as `specd quantize` from a config
// specd pipeline --preset smoke|tiny --out DIR: all of them, then evaluation and a report.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/specd/commands.h"
#include "cli/specd/yaml_config.h"
#include "common/io/allowed_roots.h"
#include "common/io/qwen35_config.h"
#include "common/quantize/awq.h"
#include "common/quantize/quantize_checkpoint.h"
#include "common/text/tokenizer.h"
#include "nlohmann/json.hpp"
#include "training/conversations.h"
#include "training/drafter_training.h"
#include "training/gptq_drafter.h"
#include "training/local_corpus.h"
#include "training/packed_dataset.h"
#include "training/pipeline.h"
#include "training/pretrain.h"
#include "training/qad.h"
#include "training/regenerate.h"
#include "training/training_loop.h"

namespace specd::cli {
namespace {

absl::Status RequireKeys(
    std::initializer_list<std::pair<const char*, const std::filesystem::path*>> keys) {
  for (const auto& [key, value] : keys) {
    if (value->empty())
      return absl::InvalidArgumentError(absl::StrCat("the config needs `", key, "`"));
  }
  return absl::OkStatus();
}

// The keys every training stage shares: the loop's (training_loop.h), `out` its directory.
void ReadLoop(YamlConfig& config, train::TrainingLoopOptions& loop) {
  config.Read("out", loop.dir);
  config.Read("steps", loop.steps);
  config.Read("accumulation", loop.accumulation);
  config.Read("lr", loop.lr);
  config.Read("warmup_ratio", loop.warmup_ratio);
  config.Read("clip", loop.clip);
  config.Read("beta1", loop.adamw.beta1);
  config.Read("beta2", loop.adamw.beta2);
  config.Read("eps", loop.adamw.eps);
  config.Read("weight_decay", loop.adamw.weight_decay);
  config.Read("validate_every", loop.validate_every);
  config.Read("save_every", loop.save_every);
}

absl::Status Pack(YamlConfig& config, bool dry_run) {
  std::filesystem::path input, tokenizer, out;
  train::PackOptions options;
  config.Read("input", input);
  config.Read("tokenizer", tokenizer);
  config.Read("out", out);
  config.Read("sequence_length", options.sequence_length);
  config.Read("validation_fraction", options.validation_fraction);
  config.Read("seed", options.seed);
  config.Read("sequences_per_shard", options.sequences_per_shard);
  if (absl::Status status = config.Finish(); !status.ok()) return status;
  if (absl::Status status =
          RequireKeys({{"input", &input}, {"tokenizer", &tokenizer}, {"out", &out}});
      !status.ok()) {
    return status;
  }
  if (dry_run) return absl::OkStatus();
  absl::StatusOr<std::vector<train::Conversation>> records = train::ReadConversations(input);
  if (!records.ok()) return records.status();
  absl::StatusOr<text::Tokenizer> loaded = text::Tokenizer::FromFile(tokenizer);
  if (!loaded.ok()) return loaded.status();
  options.tokenizer_name = tokenizer.string();
  return train::Pack(*records, *loaded, options, out);
}

absl::Status Regenerate(YamlConfig& config, bool dry_run) {
  train::RegenerateOptions options;
  config.Read("input", options.input);
  config.Read("output", options.output);
  config.Read("teacher", options.teacher);
  config.Read("tokenizer", options.tokenizer);
  config.Read("enable_thinking", options.enable_thinking);
  config.Read("temperature", options.temperature);
  config.Read("top_p", options.top_p);
  config.Read("top_k", options.top_k);
  config.Read("max_new_tokens", options.max_new_tokens);
  config.Read("seed", options.seed);
  config.Read("batch_size", options.batch_size);
  if (absl::Status status = config.Finish(); !status.ok()) return status;
  if (absl::Status status = RequireKeys(
          {{"input", &options.input}, {"output", &options.output}, {"teacher", &options.teacher}});
      !status.ok()) {
    return status;
  }
  if (dry_run) return absl::OkStatus();
  options.on_progress = train::PrintRegenerateProgress;
  return train::Regenerate(options);
}

absl::Status Pretrain(YamlConfig& config, bool dry_run) {
  train::PretrainOptions options;
  std::filesystem::path model_config;
  config.Read("model_config", model_config);  // a Qwen3.5 text config.json: the architecture
  config.Read("tokenizer", options.tokenizer);
  config.Read("data", options.data);
  ReadLoop(config, options.loop);
  config.Read("validation_sequences", options.validation_sequences);
  config.Read("seed", options.seed);
  if (absl::Status status = config.Finish(); !status.ok()) return status;
  if (absl::Status status = RequireKeys({{"model_config", &model_config},
                                         {"tokenizer", &options.tokenizer},
                                         {"data", &options.data},
                                         {"out", &options.loop.dir}});
      !status.ok()) {
    return status;
  }
  if (dry_run) return absl::OkStatus();
  std::ifstream in(model_config);
  const nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(model_config.string(), " is not JSON"));
  }
  absl::StatusOr<io::Qwen35TextConfig> architecture = io::ParseQwen35TextConfig(json, "");
  if (!architecture.ok()) return architecture.status();
  options.model = *std::move(architecture);
  absl::StatusOr<train::PretrainResult> result = train::RunPretrain(options);
  if (!result.ok()) return result.status();
  std::printf("{\"validation_loss\": %.6f, \"checkpoint\": \"%s\"}\n", result->validation_loss,
              result->checkpoint.c_str());
  return absl::OkStatus();
}

absl::Status Qad(YamlConfig& config, bool dry_run) {
  train::QadOptions options;
  config.Read("teacher", options.teacher);
  config.Read("student", options.student);
  config.Read("data", options.data);
  ReadLoop(config, options.loop);
  config.Read("validation_sequences", options.validation_sequences);
  config.Read("seed", options.seed);
  if (absl::Status status = config.Finish(); !status.ok()) return status;
  if (absl::Status status = RequireKeys({{"teacher", &options.teacher},
                                         {"student", &options.student},
                                         {"data", &options.data},
                                         {"out", &options.loop.dir}});
      !status.ok()) {
    return status;
  }
  if (dry_run) return absl::OkStatus();
  absl::StatusOr<train::QadResult> result = train::RunQad(options);
  if (!result.ok()) return result.status();
  std::printf("{\"kl_before\": %.6f, \"kl_after\": %.6f, \"checkpoint\": \"%s\"}\n",
              result->before.kl, result->after.kl, result->checkpoint.c_str());
  return absl::OkStatus();
}

absl::Status Drafter(YamlConfig& config, bool dry_run) {
  train::DrafterTrainingOptions options;
  config.Read("target", options.target);
  config.Read("data", options.data);
  config.Read("init", options.init);
  ReadLoop(config, options.loop);
  config.Read("anchors", options.anchors);
  config.Read("gamma", options.gamma);
  config.Read("validation_sequences", options.validation_sequences);
  config.Read("seed", options.seed);
  if (absl::Status status = config.Finish(); !status.ok()) return status;
  if (absl::Status status = RequireKeys({{"target", &options.target},
                                         {"data", &options.data},
                                         {"init", &options.init},
                                         {"out", &options.loop.dir}});
      !status.ok()) {
    return status;
  }
  if (dry_run) return absl::OkStatus();
  absl::StatusOr<train::DrafterMetrics> metrics = train::TrainDrafter(options);
  if (!metrics.ok()) return metrics.status();
  std::printf("{\"loss\": %.6f, \"accuracy\": %.4f, \"expected_acceptance\": %.4f}\n",
              metrics->loss, metrics->accuracy, metrics->expected_acceptance);
  return absl::OkStatus();
}

absl::Status GptqDrafter(YamlConfig& config, bool dry_run) {
  train::GptqDrafterOptions options;
  config.Read("target", options.target);
  config.Read("drafter", options.drafter);
  config.Read("data", options.data);
  config.Read("out", options.out);
  config.Read("sequences", options.sequences);
  config.Read("anchors_per_sequence", options.anchors_per_sequence);
  config.Read("group_size", options.gptq.group_size);
  config.Read("damp", options.gptq.damp);
  config.Read("act_order", options.gptq.act_order);
  if (absl::Status status = config.Finish(); !status.ok()) return status;
  if (absl::Status status = RequireKeys({{"target", &options.target},
                                         {"drafter", &options.drafter},
                                         {"data", &options.data},
                                         {"out", &options.out}});
      !status.ok()) {
    return status;
  }
  if (dry_run) return absl::OkStatus();
  return train::RunGptqDrafter(options);
}

// A finished `out` (its config.json written last) is kept, so a re-run is a no-op; the checkpoint
// is written beside it and renamed into place, so an interrupted run starts over cleanly.
absl::Status Quantize(YamlConfig& config, bool dry_run) {
  std::filesystem::path model, calib, out;
  std::string method = "awq";
  quant::RtnOptions rtn{.group_size = 128, .symmetric = true, .scale_dtype = io::DType::kBF16};
  int64_t calib_samples = 128, calib_seq_len = 512;
  config.Read("model", model);
  config.Read("out", out);
  config.Read("method", method);  // awq or rtn
  config.Read("group_size", rtn.group_size);
  config.Read("calib", calib);  // AWQ's calibration text (UTF-8)
  config.Read("calib_samples", calib_samples);
  config.Read("calib_seq_len", calib_seq_len);
  if (absl::Status status = config.Finish(); !status.ok()) return status;
  if (absl::Status status = RequireKeys({{"model", &model}, {"out", &out}}); !status.ok()) {
    return status;
  }
  if (method != "awq" && method != "rtn") {
    return absl::InvalidArgumentError(absl::StrCat("method: \"", method, "\" is not awq or rtn"));
  }
  if (method == "awq" && calib.empty()) return absl::InvalidArgumentError("awq needs `calib`");
  if (dry_run) return absl::OkStatus();
  if (std::filesystem::exists(out / "config.json")) return absl::OkStatus();
  std::filesystem::path staging = out;
  staging += ".partial";
  std::filesystem::remove_all(staging);
  quant::WeightOverrides overrides;
  if (method == "awq") {
    absl::StatusOr<std::vector<std::vector<int32_t>>> calibration =
        quant::ReadCalibrationText(calib, model, calib_seq_len, calib_samples);
    if (!calibration.ok()) return calibration.status();
    quant::AwqOptions awq;
    awq.rtn = rtn;
    absl::StatusOr<quant::AwqResult> result =
        quant::ComputeAwqOverrides(model, awq, *calibration, [](int64_t done, int64_t total) {
          std::fprintf(stderr, "awq search [%lld/%lld]\n", static_cast<long long>(done),
                       static_cast<long long>(total));
        });
    if (!result.ok()) return result.status();
    overrides = std::move(result->overrides);
  }
  if (absl::Status status = quant::QuantizeCheckpoint(
          model, staging, {.rtn = rtn, .ignore = quant::DefaultQuantizeIgnore()},
          [](const quant::QuantizeProgress& p) {
            std::fprintf(stderr, "[%lld/%lld] %s %s\n", static_cast<long long>(p.done),
                         static_cast<long long>(p.total), p.quantized ? "int4" : "copy",
                         p.name.c_str());
          },
          &overrides);
      !status.ok()) {
    return status;
  }
  std::error_code error;
  std::filesystem::rename(staging, out, error);  // replaces an empty `out`
  if (error) {
    return absl::InternalError(absl::StrCat("cannot move ", staging.string(), " to ", out.string(),
                                            ": ", error.message()));
  }
  return absl::OkStatus();
}

// Where a stage's config may reach: relative paths against `base_dir` (default the config file's
// directory), and every path under `allowed_roots` when any are given.
struct PathRules {
  std::vector<std::string> allowed_roots;
  std::string base_dir;
};

absl::Status Train(const std::string& stage, const std::string& config_file, bool dry_run,
                   const PathRules& rules) {
  const std::map<std::string, absl::Status (*)(YamlConfig&, bool)> stages = {
      {"pack", Pack},       {"regenerate", Regenerate},    {"pretrain", Pretrain}, {"qad", Qad},
      {"drafter", Drafter}, {"gptq-drafter", GptqDrafter}, {"quantize", Quantize}};
  const auto found = stages.find(stage);
  if (found == stages.end()) {
    std::vector<std::string> names;
    for (const auto& [name, run] : stages) names.push_back(name);
    return absl::InvalidArgumentError(
        absl::StrCat("no stage \"", stage, "\"; stages: ", absl::StrJoin(names, ", ")));
  }
  absl::StatusOr<YamlConfig> config = YamlConfig::Load(config_file);
  if (!config.ok()) return config.status();
  if (!rules.base_dir.empty()) config->ResolvePathsAgainst(rules.base_dir);
  if (!rules.allowed_roots.empty()) {
    absl::StatusOr<io::AllowedRoots> roots =
        io::AllowedRoots::Create({rules.allowed_roots.begin(), rules.allowed_roots.end()});
    if (!roots.ok()) return roots.status();
    config->ConfinePathsTo(*std::move(roots));
  }
  return found->second(*config, dry_run);
}

}  // namespace

void AddTrainCommands(CLI::App& app) {
  auto stage = std::make_shared<std::string>();
  auto config = std::make_shared<std::string>();
  CLI::App* train = app.add_subcommand("train", "run one training stage from a YAML config");
  train
      ->add_option("stage", *stage,
                   "pack, regenerate, pretrain, qad, drafter, gptq-drafter or quantize")
      ->required();
  train->add_option("--config", *config, "the stage's YAML config")->required();
  auto dry_run = std::make_shared<bool>(false);
  train->add_flag("--dry-run", *dry_run, "check the config (every key known and valid) and stop");
  auto rules = std::make_shared<PathRules>();
  train->add_option(
      "--allowed-root", rules->allowed_roots,
      "a directory every path of the config must lie under (repeatable; a path "
      "outside all of them, after `..` and symlinks, is refused with exit status 77)");
  train->add_option("--base-dir", rules->base_dir,
                    "the directory relative paths resolve against (default: the config's)");
  train->callback([train, stage, config, dry_run, rules] {
    RunOrExit(*train, [&] { return Train(*stage, *config, *dry_run, *rules); });
  });

  auto preset = std::make_shared<std::string>("smoke");
  auto out = std::make_shared<std::string>();
  CLI::App* pipeline = app.add_subcommand(
      "pipeline", "pretrain → AWQ → QAD → regenerate → drafter stages 1, 2 → GPTQ → evaluate");
  pipeline->add_option("--preset", *preset, "smoke (minutes) or tiny (≤ 30 minutes)");
  pipeline->add_option("--out", *out, "the pipeline's directory (resumed if it exists)")
      ->required();
  auto corpus = std::make_shared<std::string>(train::DefaultCorpusDir().string());
  pipeline->add_option("--corpus", *corpus, "where scripts/setup.sh installed the training corpus")
      ->capture_default_str();
  auto check_only = std::make_shared<bool>(false);
  pipeline->add_flag("--dry-run", *check_only, "check the preset name and stop");
  pipeline->callback([pipeline, preset, corpus, out, check_only] {
    RunOrExit(*pipeline, [&]() -> absl::Status {
      absl::StatusOr<train::PipelinePreset> chosen = train::PipelinePresetNamed(*preset);
      if (!chosen.ok()) return chosen.status();
      if (*check_only) return absl::OkStatus();
      absl::StatusOr<std::string> report = train::RunPipeline(*chosen, *corpus, *out);
      if (!report.ok()) return report.status();
      std::cout << *report;
      return absl::OkStatus();
    });
  });
}

}  // namespace specd::cli
