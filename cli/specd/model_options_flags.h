#pragma once
// Where and how a command runs a model: `--device`, `--dtype`, how the CPU's kernels take it
// (`--int4-activations`, `--lm-head`) and whether a GPU replays its steps (`--cuda-graphs`). One
// set of options for every command that loads one.
#include <c10/core/Device.h>
#include <c10/util/Exception.h>

#include <map>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "common/model/model_options.h"

namespace specd::cli {

// An option whose values are the names in `choices` (any case).
template <typename T>
void AddChoiceOption(CLI::App& command, const std::string& name, T& value,
                     const std::map<std::string, T>& choices, const std::string& help) {
  command.add_option(name, value, help)
      ->transform(CLI::CheckedTransformer(choices, CLI::ignore_case));
}

// Adds the options to `command`, each setting its fields of `options` as it is parsed; `scope`
// starts their help (e.g. "verifier, drafter: "). The dtype follows the device unless given:
// float32 on the CPU, bfloat16 on CUDA.
inline void AddModelOptions(CLI::App& command, model::ModelOptions& options,
                            const std::string& scope = "") {
  auto dtype_given = std::make_shared<bool>(false);
  command
      .add_option_function<std::string>(
          "--device",
          [&options, dtype_given](const std::string& name) {
            options.device = c10::Device(name);
            if (!*dtype_given)
              options.dtype = options.device.is_cuda() ? c10::kBFloat16 : c10::kFloat;
          },
          scope + "where the model runs: cpu (the default), cuda, cuda:1, ...")
      ->check(CLI::Validator(
          [](std::string& name) -> std::string {
            try {
              c10::Device device(name);
            } catch (const c10::Error&) {
              return "\"" + name + "\" is not a device (cpu, cuda, cuda:1, ...)";
            }
            return "";
          },
          "DEVICE"));
  command
      .add_option_function<std::string>(
          "--dtype",
          [&options, dtype_given](const std::string& name) {
            options.dtype = name == "bfloat16" ? c10::kBFloat16 : c10::kFloat;
            *dtype_given = true;
          },
          scope +
              "activations and dense weights: float32 or bfloat16 (default: float32 on the "
              "CPU, bfloat16 on CUDA)")
      ->transform(CLI::IsMember({"float32", "bfloat16"}, CLI::ignore_case));
  AddChoiceOption<quant::Int4Activations>(
      command, "--int4-activations", options.int4_activations,
      {{"exact", quant::Int4Activations::kExact},
       {"bf16", quant::Int4Activations::kBf16},
       {"int8", quant::Int4Activations::kInt8}},
      scope +
          "exact: W4A16 on the model's activations (the default); bf16 (CPU only): activations "
          "rounded to bf16, AVX512-BF16 dot products summing in float32, near-exact and faster; "
          "int8 (CPU only): W4A8, integer dot products (AVX-512 VNNI or AVX2) on activations "
          "rounded per 128 columns, the fastest, most on verify blocks, batches and prefill");
  AddChoiceOption<model::HeadWeights>(
      command, "--lm-head", options.head,
      {{"stored", model::HeadWeights::kStored}, {"int8", model::HeadWeights::kInt8}},
      scope +
          "stored: the LM head as the checkpoint stores it (the default, exact); int8 (CPU only): "
          "rounded per row to 8 bits and multiplied on int8 activations (AVX-512 VNNI or AVX2), "
          "half a bf16 head's bytes per token; not exact");
  command.add_flag("--cuda-graphs", options.cuda_graphs,
                   scope +
                       "the target's decode steps and verify blocks and a drafter's blocks as CUDA "
                       "graphs: one captured per batch of sequences on its second step, replayed "
                       "while the batch lasts (not yet run on a GPU)");
}

}  // namespace specd::cli
