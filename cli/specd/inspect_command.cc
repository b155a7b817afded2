// specd inspect DIR: what a checkpoint directory holds (model, tensors, quantization), after
// validating its config.json and every safetensors header.
#include <iostream>
#include <memory>
#include <string>

#include "cli/specd/commands.h"
#include "common/io/checkpoint_summary.h"

namespace specd::cli {
namespace {

struct InspectFlags {
  std::string dir;
  std::string format = "text";
};

absl::Status Inspect(const InspectFlags& flags) {
  absl::StatusOr<io::CheckpointSummary> summary = io::SummarizeCheckpoint(flags.dir);
  if (!summary.ok()) return summary.status();
  if (flags.format == "json") {
    std::cout << io::SummaryToJson(*summary).dump(2) << "\n";
  } else {
    std::cout << io::SummaryToText(*summary);
  }
  return absl::OkStatus();
}

}  // namespace

void AddInspectCommand(CLI::App& app) {
  auto flags = std::make_shared<InspectFlags>();
  CLI::App* inspect = app.add_subcommand(
      "inspect", "Summarise a checkpoint directory: model config, tensors, quantization");
  inspect->add_option("dir", flags->dir, "Checkpoint directory (config.json + safetensors)")
      ->required();
  inspect
      ->add_option("--format", flags->format, "text for people, json for a machine-readable object")
      ->check(CLI::IsMember({"text", "json"}));
  inspect->callback([inspect, flags] { RunOrExit(*inspect, [&] { return Inspect(*flags); }); });
}

}  // namespace specd::cli
