// specd bench: measurements of the engine on this machine.
//   decode      prefill and decode speed of the target, and the decode step's effective weight
//               bandwidth against a host copy measured in the same run;
//   init-model  a random-weight checkpoint of a named or given shape to measure on.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/io/qwen35_config.h"
#include "common/model/qwen35_model.h"
#include "common/model/qwen35_presets.h"
#include "common/model/random_checkpoint.h"
#include "kernels/cpu/parallel_copy.h"
#include "nlohmann/json.hpp"
#include "services/cli/commands.h"

namespace specd::cli {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct DecodeBenchFlags {
  std::string model;
  int64_t prompt_length = 128;
  int64_t tokens = 64;
  int threads = 0;  // 0 keeps LibTorch's default
  int64_t copy_mib = 256;
  uint64_t seed = 0;
};

// Bytes/s of the best of a few ParallelCopy runs over buffers far larger than the last-level
// cache: the rate at which DRAM can stream weights to these threads. Counts bytes read, as
// the weight bandwidth does.
double HostCopyBandwidth(int64_t mebibytes, int threads) {
  const auto bytes = static_cast<size_t>(mebibytes) << 20;
  std::vector<std::byte> source(bytes, std::byte{1});
  std::vector<std::byte> destination(bytes, std::byte{0});
  double best = 0;
  for (int run = 0; run < 5; ++run) {
    const Clock::time_point start = Clock::now();
    kernels::cpu::ParallelCopy(destination.data(), source.data(), bytes, threads);
    best = std::max(best, static_cast<double>(bytes) / SecondsSince(start));
  }
  return best;
}

absl::Status BenchDecode(const DecodeBenchFlags& flags) {
  if (flags.threads > 0) at::set_num_threads(flags.threads);
  const int threads = at::get_num_threads();
  absl::StatusOr<model::Qwen35Model> target = model::Qwen35Model::Load(flags.model);
  if (!target.ok()) return target.status();
  const io::Qwen35TextConfig& config = target->config();

  std::mt19937_64 random(flags.seed);
  std::uniform_int_distribution<int64_t> token(0, config.vocab_size - 1);
  std::vector<int64_t> prompt(flags.prompt_length);
  for (int64_t& id : prompt) id = token(random);
  absl::StatusOr<model::Qwen35Cache> cache = target->NewCache(flags.prompt_length + flags.tokens);
  if (!cache.ok()) return cache.status();

  // The first prefill pages the memory-mapped weights in; the second is the one measured.
  if (absl::StatusOr<model::ForwardOutput> warm = target->Prefill(prompt, *cache); !warm.ok()) {
    return warm.status();
  }
  Clock::time_point start = Clock::now();
  absl::StatusOr<model::ForwardOutput> prefill = target->Prefill(prompt, *cache);
  if (!prefill.ok()) return prefill.status();
  const double prefill_s = SecondsSince(start);

  int64_t next = prefill->logits.select(0, 0).argmax().item<int64_t>();
  start = Clock::now();
  for (int64_t step = 0; step < flags.tokens; ++step) {
    absl::StatusOr<at::Tensor> logits = target->Decode(next, *cache);
    if (!logits.ok()) return logits.status();
    next = logits->argmax().item<int64_t>();
  }
  const double decode_s = SecondsSince(start) / static_cast<double>(flags.tokens);

  const double step_bytes = static_cast<double>(model::Qwen35DecodeStepParameterCount(config)) *
                            static_cast<double>(c10::elementSize(target->options().dtype));
  const double weight_bandwidth = step_bytes / decode_s;
  const double copy_bandwidth = HostCopyBandwidth(flags.copy_mib, threads);

  const double parameters = static_cast<double>(model::Qwen35ParameterCount(config));
  std::printf("model            %s (%.3g B parameters, %.0f MiB read per decode step)\n",
              flags.model.c_str(), parameters / 1e9, step_bytes / (1 << 20));
  std::printf("threads          %d\n", threads);
  std::printf("prefill          %lld tokens in %.1f ms: %.1f tokens/s\n",
              static_cast<long long>(flags.prompt_length), prefill_s * 1e3,
              static_cast<double>(flags.prompt_length) / prefill_s);
  std::printf("decode           %.2f ms/token over %lld tokens: %.1f tokens/s\n", decode_s * 1e3,
              static_cast<long long>(flags.tokens), 1 / decode_s);
  std::printf("weight bandwidth %.2f GB/s\n", weight_bandwidth / 1e9);
  std::printf("copy bandwidth   %.2f GB/s (ParallelCopy, %lld MiB, %d threads)\n",
              copy_bandwidth / 1e9, static_cast<long long>(flags.copy_mib), threads);
  std::printf("ratio            %.0f %% of copy bandwidth\n",
              100 * weight_bandwidth / copy_bandwidth);
  return absl::OkStatus();
}

struct InitModelFlags {
  std::string preset;
  std::string config;
  std::string out;
  std::string dtype = "float32";
  uint64_t seed = 0;
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
  std::cerr << "writing " << model::Qwen35ParameterCount(*config) / 1e9 << " B parameters ("
            << flags.dtype << ") to " << flags.out << "\n";
  // Shards of 2 GiB, as Hugging Face checkpoints are split, so no file is unwieldy.
  return model::WriteRandomQwen35Checkpoint(
      flags.out, *config,
      {.seed = flags.seed, .max_shard_bytes = uint64_t{2} << 30, .dtype = dtype});
}

void AddDecodeBench(CLI::App& bench) {
  auto flags = std::make_shared<DecodeBenchFlags>();
  CLI::App* command = bench.add_subcommand(
      "decode", "Prefill and decode speed, and weight bandwidth against a host copy");
  command->add_option("--model", flags->model, "Checkpoint directory")->required();
  command->add_option("--prompt-len", flags->prompt_length, "Random prompt tokens to prefill")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--tokens", flags->tokens, "Decode steps to time")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--threads", flags->threads, "LibTorch intra-op threads (default: its own)")
      ->check(CLI::PositiveNumber);
  command->add_option("--copy-mib", flags->copy_mib, "Size of the copy bandwidth's buffers")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--seed", flags->seed, "Seed of the random prompt")->capture_default_str();
  command->callback([command, flags] { RunOrExit(*command, [&] { return BenchDecode(*flags); }); });
}

void AddInitModel(CLI::App& bench) {
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
  command->callback([command, flags, preset, config] {
    RunOrExit(*command, [&] {
      if (preset->empty() && config->empty()) {
        return absl::InvalidArgumentError("give --preset NAME or --config FILE");
      }
      return InitModel(*flags);
    });
  });
}

}  // namespace

void AddBenchCommands(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Measure the engine on this machine");
  bench->require_subcommand(1);
  AddDecodeBench(*bench);
  AddInitModel(*bench);
}

}  // namespace specd::cli
