#pragma once
// The `specd` command line: each file in this folder adds one family of subcommands.
#include <functional>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"

namespace specd::cli {

// Runs a subcommand body. A failed status is printed as "specd <command>: <message>" on stderr
// and becomes exit code 1, so every command reports errors the same way.
void RunOrExit(const CLI::App& command, const std::function<absl::Status()>& body);

void AddTokenizeCommands(CLI::App& app);  // tokenize, detokenize (tokenize_command.cc)
void AddInspectCommand(CLI::App& app);    // inspect (inspect_command.cc)
void AddForwardCommand(CLI::App& app);    // forward (forward_command.cc)
void AddGenerateCommand(CLI::App& app);   // generate (generate_command.cc)
void AddBenchCommands(CLI::App& app);     // bench, with the subcommands below (bench_command.cc)
void AddDecodeBench(CLI::App& bench);     // bench decode (decode_bench.cc)
void AddInitModelBench(CLI::App& bench);  // bench init-model (init_model_bench.cc)
void AddSpecBench(CLI::App& bench);       // bench spec (spec_bench_command.cc)
void AddServeBench(CLI::App& bench);      // bench serve (serve_bench_command.cc; with services)
void AddDrafterCommands(CLI::App& app);   // drafter init (drafter_command.cc)
void AddQuantizeCommand(CLI::App& app);   // quantize (quantize_command.cc)
void AddTrainCommands(CLI::App& app);     // train, pipeline (train_command.cc)
void AddServeCommand(CLI::App& app);      // serve (serve_command.cc; not in engine-only builds)

}  // namespace specd::cli
