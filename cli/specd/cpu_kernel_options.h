#pragma once
// `--int4-activations exact|int8` and `--lm-head stored|int8`: how the CPU's kernels take a
// model, one pair of options for every command that loads one.
#include <map>
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

// Adds both options to `command`, setting their fields of `options`; `scope` starts their help
// (e.g. "verifier, drafter: ").
inline void AddCpuKernelOptions(CLI::App& command, model::ModelOptions& options,
                                const std::string& scope = "") {
  AddChoiceOption<quant::Int4Activations>(
      command, "--int4-activations", options.int4_activations,
      {{"exact", quant::Int4Activations::kExact}, {"int8", quant::Int4Activations::kInt8}},
      scope +
          "exact: W4A16 on float32 activations (the default); int8: W4A8, integer dot products "
          "(AVX-512 VNNI or AVX2) on activations rounded per 32 columns, faster, most on verify "
          "blocks, batches and prefill; not exact");
  AddChoiceOption<model::HeadWeights>(
      command, "--lm-head", options.head,
      {{"stored", model::HeadWeights::kStored}, {"int8", model::HeadWeights::kInt8}},
      scope +
          "stored: the LM head as the checkpoint stores it (the default, exact); int8: rounded "
          "per row to 8 bits and multiplied on int8 activations (AVX-512 VNNI or AVX2), half a "
          "bf16 head's bytes per token; not exact");
}

}  // namespace specd::cli
