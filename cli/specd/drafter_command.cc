// specd drafter: DFlash drafter checkpoints.
//   init         a random-weight drafter matched to a target (research/dflash.md §2): the
//                target's hidden size and attention shape, the DFlash rule's tapped layers, MASK =
//                the target's last id unless given; the starting point of drafter training and
//                the engine's tests.
//   prune-vocab  a copy of a drafter whose head scores only the K tokens its training data
//                trains it to produce most often (training/draft_vocabulary.h).
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/specd/commands.h"
#include "common/io/qwen35_checkpoint_config.h"
#include "common/model/dflash_drafter.h"
#include "common/model/synthetic/random_drafter.h"
#include "training/draft_vocabulary.h"
#include "training/packed_dataset.h"

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

struct PruneVocabFlags {
  std::string drafter;
  std::vector<std::string> data;
  int64_t keep = 0;
  std::string out;
};

absl::Status PruneVocab(const PruneVocabFlags& flags) {
  std::vector<train::PackedDataset> data;
  for (const std::string& dir : flags.data) {
    absl::StatusOr<train::PackedDataset> dataset = train::PackedDataset::Open(dir);
    if (!dataset.ok()) return dataset.status();
    data.push_back(*std::move(dataset));
  }
  absl::StatusOr<train::DraftVocabulary> vocab = train::MostFrequentTokens(data, flags.keep);
  if (!vocab.ok()) return vocab.status();
  if (absl::Status written = train::WritePrunedDrafter(flags.drafter, vocab->ids, flags.out);
      !written.ok()) {
    return written;
  }
  // What was written must be what the engine loads.
  absl::StatusOr<model::DFlashDrafter> pruned = model::DFlashDrafter::Load(flags.out);
  if (!pruned.ok()) return pruned.status();
  std::cerr << "wrote " << flags.out << ": a head of " << vocab->ids.size() << " of "
            << pruned->config().vocab_size << " tokens, covering "
            << absl::StrFormat("%.2f", 100 * vocab->coverage) << " % of the trained tokens\n";
  return absl::OkStatus();
}

void AddPruneVocab(CLI::App& drafter) {
  auto flags = std::make_shared<PruneVocabFlags>();
  CLI::App* command = drafter.add_subcommand(
      "prune-vocab",
      "Copy a drafter with a head over the K tokens its training data has most often (drafting "
      "scores K rows of the target's head; verification keeps all of them)");
  command->add_option("--drafter", flags->drafter, "The drafter's checkpoint directory")
      ->required();
  command
      ->add_option("--data", flags->data,
                   "Packed datasets it was trained on (counted where they have loss)")
      ->required();
  command->add_option("--keep", flags->keep, "Tokens to keep (K)")
      ->required()
      ->check(CLI::PositiveNumber);
  command->add_option("--out", flags->out, "Directory to write (created; must be empty)")
      ->required();
  command->callback([command, flags] { RunOrExit(*command, [&] { return PruneVocab(*flags); }); });
}

}  // namespace

void AddDrafterCommands(CLI::App& app) {
  CLI::App* drafter = app.add_subcommand("drafter", "DFlash drafter checkpoints");
  drafter->require_subcommand(1);
  AddInitDrafter(*drafter);
  AddPruneVocab(*drafter);
}

}  // namespace specd::cli
