// specd bench init-model: a random-weight Qwen3.5 checkpoint of a named or given shape to
// measure on, dense or with its Linears quantized (RTN) as they are generated.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/specd/commands.h"
#include "common/io/checkpoint_writer.h"
#include "common/io/qwen35_config.h"
#include "common/model/synthetic/qwen35_presets.h"
#include "common/model/synthetic/random_checkpoint.h"
#include "common/quantize/quantize_checkpoint.h"
#include "nlohmann/json.hpp"

namespace specd::cli {
namespace {

struct InitModelFlags {
  std::string preset;
  std::string config;
  std::string out;
  std::string dtype = "float32";
  uint64_t seed = 0;
  std::string quantize;  // "rtn": Linears written as W4A16, never dense
  int64_t group_size = 128;
  bool asymmetric = false;
};

absl::StatusOr<io::Qwen35TextConfig> ShapeOf(const InitModelFlags& flags) {
  if (!flags.preset.empty()) return model::Qwen35Preset(flags.preset);
  std::ifstream file(flags.config);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read ", flags.config));
  const nlohmann::json json = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(flags.config, " is not JSON"));
  }
  return io::ParseQwen35TextConfig(json, flags.config);
}

absl::Status InitModel(const InitModelFlags& flags) {
  absl::StatusOr<io::Qwen35TextConfig> config = ShapeOf(flags);
  if (!config.ok()) return config.status();
  std::error_code error;
  std::filesystem::create_directories(flags.out, error);
  if (error)
    return absl::InternalError(absl::StrCat("cannot create ", flags.out, ": ", error.message()));
  const io::DType dtype = flags.dtype == "bf16" ? io::DType::kBF16 : io::DType::kF32;
  nlohmann::json quantization = nullptr;
  if (flags.quantize == "rtn") {
    quantization = quant::CompressedTensorsConfig(
        {.group_size = flags.group_size, .symmetric = !flags.asymmetric, .scale_dtype = dtype},
        quant::DefaultQuantizeIgnore());
  }
  std::cerr << "writing " << model::Qwen35ParameterCount(*config) / 1e9 << " B parameters ("
            << flags.dtype << (flags.quantize.empty() ? "" : ", Linears W4A16 by RTN") << ") to "
            << flags.out << "\n";
  // Shards of 2 GiB, as every checkpoint specd writes and as Hugging Face checkpoints are split,
  // so no file is unwieldy.
  return model::WriteRandomQwen35Checkpoint(flags.out, *config,
                                            {.layout = model::CheckpointLayout::kCausalLm,
                                             .seed = flags.seed,
                                             .max_shard_bytes = io::kMaxShardBytes,
                                             .dtype = dtype,
                                             .quantization_config = quantization});
}

}  // namespace

void AddInitModelBench(CLI::App& bench) {
  auto flags = std::make_shared<InitModelFlags>();
  CLI::App* command = bench.add_subcommand(
      "init-model", "Write a random-weight Qwen3.5 checkpoint of a preset or given shape");
  CLI::Option* preset = command->add_option(
      "--preset", flags->preset, "One of: " + absl::StrJoin(model::Qwen35PresetNames(), ", "));
  CLI::Option* config = command->add_option("--config", flags->config,
                                            "A Qwen3.5 config.json to take the shape from");
  preset->excludes(config);
  command->add_option("--out", flags->out, "Directory to write (created if missing)")->required();
  command->add_option("--dtype", flags->dtype, "Weight type")
      ->capture_default_str()
      ->check(CLI::IsMember({"float32", "bf16"}));
  command->add_option("--seed", flags->seed, "Seed of the weights")->capture_default_str();
  CLI::Option* quantize =
      command
          ->add_option("--quantize", flags->quantize,
                       "rtn: write each Linear W4A16 (compressed-tensors), quantized as generated")
          ->check(CLI::IsMember({"rtn"}));
  command->add_option("--group-size", flags->group_size, "With --quantize: columns per scale")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->needs(quantize);
  command->add_flag("--asymmetric", flags->asymmetric, "With --quantize: store zero points")
      ->needs(quantize);
  command->callback([command, flags, preset, config] {
    RunOrExit(*command, [&] {
      if (preset->empty() && config->empty()) {
        return absl::InvalidArgumentError("give --preset NAME or --config FILE");
      }
      return InitModel(*flags);
    });
  });
}

}  // namespace specd::cli
