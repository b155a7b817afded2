#pragma once
// `--int4-activations exact|int8`, one option for every command that loads a W4A16 model.
#include <map>
#include <string>

#include "CLI/CLI.hpp"
#include "common/int4/int4_activations.h"

namespace specd::cli {

// Adds the option to `command`, setting `value`; `scope` starts its help (e.g. "verifier,
// drafter: ").
inline CLI::Option* AddInt4ActivationsOption(CLI::App& command, quant::Int4Activations& value,
                                             const std::string& scope = "") {
  const std::map<std::string, quant::Int4Activations> modes = {
      {"exact", quant::Int4Activations::kExact}, {"int8", quant::Int4Activations::kInt8}};
  return command
      .add_option("--int4-activations", value,
                  scope +
                      "exact: W4A16 on float32 activations (the default); int8: W4A8, AVX-512 "
                      "VNNI on activations rounded per 32 columns, faster on verify blocks, "
                      "batches and prefill, not exact")
      ->transform(CLI::CheckedTransformer(modes, CLI::ignore_case));
}

}  // namespace specd::cli
