// specd forward: runs the target model on given token ids and writes its logits (and hidden
// states) to a safetensors file, through any of the engine's paths, so they can be compared with
// another implementation.
#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/specd/commands.h"
#include "cli/specd/model_options_flags.h"
#include "cli/specd/token_id_list.h"
#include "common/io/safetensors_writer.h"
#include "common/model/qwen35_model.h"

namespace specd::cli {
namespace {

struct ForwardFlags {
  std::string model;
  std::string ids;
  std::string out;
  bool hidden_states = false;
  std::optional<int64_t> split;
  std::optional<int64_t> block_length;
  model::ModelOptions model_options;  // AddModelOptions' flags
};

// The tensors to write: logits and optionally hidden states, all float32 on the CPU.
struct Outputs {
  at::Tensor logits;
  at::Tensor hidden_states;
};

absl::StatusOr<Outputs> RunPaths(const model::Qwen35Model& target, const std::vector<int64_t>& ids,
                                 const ForwardFlags& flags) {
  const auto length = static_cast<int64_t>(ids.size());
  absl::StatusOr<model::Qwen35Cache> cache = target.NewCache(length);
  if (!cache.ok()) return cache.status();
  const std::span<const int64_t> all(ids);
  Outputs outputs;
  if (!flags.split.has_value()) {
    model::ForwardOptions options{.logit_rows = model::LogitRows::kAll, .hidden_states = {}};
    if (flags.hidden_states) {
      for (int64_t i = 0; i <= target.config().num_hidden_layers; ++i) {
        options.hidden_states.push_back(i);
      }
    }
    absl::StatusOr<model::ForwardOutput> prefill = target.Prefill(all, *cache, options);
    if (!prefill.ok()) return prefill.status();
    outputs.logits = prefill->logits;
    if (flags.hidden_states) outputs.hidden_states = at::stack(prefill->hidden_states);
    return outputs;
  }

  const int64_t split = *flags.split;
  if (split < 1 || split >= length) {
    return absl::InvalidArgumentError(
        absl::StrCat("--split ", split, " must leave tokens on both sides of ", length, " ids"));
  }
  if (absl::StatusOr<model::ForwardOutput> prefill = target.Prefill(all.first(split), *cache);
      !prefill.ok()) {
    return prefill.status();
  }
  if (flags.block_length.has_value()) {
    const int64_t block = *flags.block_length;
    if (block < 1 || split + block > length) {
      return absl::InvalidArgumentError(absl::StrCat("--block-len ", block, " after --split ",
                                                     split, " does not fit in ", length, " ids"));
    }
    absl::StatusOr<model::ForwardOutput> verified =
        target.ForwardBlock(all.subspan(split, block), *cache,
                            {.logit_rows = model::LogitRows::kAll, .hidden_states = {}});
    if (!verified.ok()) return verified.status();
    outputs.logits = verified->logits;
    return outputs;
  }
  std::vector<at::Tensor> steps;
  for (int64_t t = split; t < length; ++t) {
    absl::StatusOr<at::Tensor> logits = target.Decode(ids[t], *cache);
    if (!logits.ok()) return logits.status();
    steps.push_back(*logits);
  }
  outputs.logits = at::stack(steps);
  return outputs;
}

io::TensorView Float32View(const std::string& name, const at::Tensor& tensor) {
  return {.name = name,
          .dtype = io::DType::kF32,
          .shape = tensor.sizes().vec(),
          .bytes = {static_cast<const std::byte*>(tensor.data_ptr()), tensor.nbytes()},
          .owner = nullptr};
}

absl::Status Forward(const ForwardFlags& flags) {
  absl::StatusOr<std::vector<int64_t>> ids = ParseIdList(flags.ids, "--ids");
  if (!ids.ok()) return ids.status();
  absl::StatusOr<model::Qwen35Model> target =
      model::Qwen35Model::Load(flags.model, flags.model_options);
  if (!target.ok()) return target.status();
  absl::StatusOr<Outputs> outputs = RunPaths(*target, *ids, flags);
  if (!outputs.ok()) return outputs.status();

  const auto to_host = [](const at::Tensor& t) { return t.to(at::kCPU, at::kFloat).contiguous(); };
  const at::Tensor logits = to_host(outputs->logits);
  std::vector<io::TensorView> views{Float32View("logits", logits)};
  at::Tensor hidden_states;
  if (outputs->hidden_states.defined()) {
    hidden_states = to_host(outputs->hidden_states);
    views.push_back(Float32View("hidden_states", hidden_states));
  }
  return io::WriteSafetensorsFile(flags.out, views, {{"format", "pt"}});
}

}  // namespace

void AddForwardCommand(CLI::App& app) {
  auto flags = std::make_shared<ForwardFlags>();
  CLI::App* command = app.add_subcommand(
      "forward", "Run the target model on token ids and write its logits to a safetensors file");
  command->add_option("--model", flags->model, "Checkpoint directory (config.json + safetensors)")
      ->required();
  command->add_option("--ids", flags->ids, "Comma-separated token ids, e.g. 1,2,3")->required();
  command->add_option("--out", flags->out, "Output .safetensors file")->required();
  CLI::Option* hidden = command->add_flag("--hidden-states", flags->hidden_states,
                                          "Also write hidden_states [layers + 1, T, hidden]: "
                                          "embeddings first, the last after the final norm");
  CLI::Option* split = command->add_option(
      "--split", flags->split,
      "Prefill ids[:N], then decode the rest one token at a time; logits holds those steps");
  command
      ->add_option("--block-len", flags->block_length,
                   "With --split N: feed ids[N:N+B] as one block on the warm cache instead")
      ->needs(split);
  hidden->excludes(split);
  AddModelOptions(*command, flags->model_options);
  command->callback([command, flags] { RunOrExit(*command, [&] { return Forward(*flags); }); });
}

}  // namespace specd::cli
