// specd drafter: DFlash drafter checkpoints.
//   init  a random-weight drafter matched to a target (research/dflash.md §2): the target's
//         hidden size and attention shape, the DFlash rule's tapped layers, MASK = the target's
//         last id unless given; the starting point of drafter training and the engine's tests.
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/specd/commands.h"
#include "common/io/qwen35_checkpoint_config.h"
#include "common/model/dflash_drafter.h"
#include "common/model/synthetic/random_drafter.h"

namespace specd::cli {
namespace {

struct InitDrafterFlags {
  std::string target;
  std::string out;
  model::RandomDrafterOptions options;
};

absl::Status InitDrafter(const InitDrafterFlags& flags) {
  absl::StatusOr<io::Qwen35CheckpointConfig> target = io::ReadQwen35CheckpointConfig(flags.target);
  if (!target.ok()) return target.status();
  std::error_code error;
  std::filesystem::create_directories(flags.out, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot create ", flags.out, ": ", error.message()));
  }
  if (absl::Status written =
          model::WriteRandomDFlashDrafter(flags.out, target->text, flags.options);
      !written.ok()) {
    return written;
  }
  // What was written must be what the engine loads for this target.
  absl::StatusOr<model::DFlashDrafter> drafter = model::DFlashDrafter::Load(flags.out);
  if (!drafter.ok()) return drafter.status();
  if (absl::Status fits = drafter->CheckTarget(target->text); !fits.ok()) return fits;
  const io::DFlashDraftConfig& config = drafter->config();
  std::cerr << "wrote a " << config.num_hidden_layers << "-layer DFlash drafter (block "
            << config.block_size << ", target layers ["
            << absl::StrJoin(config.target_layer_ids, ", ") << "], mask token "
            << config.mask_token_id << ") to " << flags.out << "\n";
  return absl::OkStatus();
}

void AddInitDrafter(CLI::App& drafter) {
  auto flags = std::make_shared<InitDrafterFlags>();
  CLI::App* command =
      drafter.add_subcommand("init", "Write a random-weight DFlash drafter matched to a target");
  command->add_option("--target", flags->target, "The target's checkpoint directory")->required();
  command->add_option("--layers", flags->options.num_layers, "Draft decoder layers")
      ->required()
      ->check(CLI::PositiveNumber);
  command->add_option("--block-size", flags->options.block_size, "Tokens per drafted block")
      ->required()
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  command->add_option("--out", flags->out, "Directory to write (created if missing)")->required();
  command->add_option("--seed", flags->options.seed, "Seed of the weights")->capture_default_str();
  command
      ->add_option("--window", flags->options.window,
                   "The symmetric attention window it drafts with by default: the sequence "
                   "length it will be trained on (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command
      ->add_option("--mask-token-id", flags->options.mask_token_id,
                   "The MASK id (default: the target's last id, which no text encodes to)")
      ->check(CLI::NonNegativeNumber);
  command->callback([command, flags] { RunOrExit(*command, [&] { return InitDrafter(*flags); }); });
}

}  // namespace

void AddDrafterCommands(CLI::App& app) {
  CLI::App* drafter = app.add_subcommand("drafter", "DFlash drafter checkpoints");
  drafter->require_subcommand(1);
  AddInitDrafter(*drafter);
}

}  // namespace specd::cli
