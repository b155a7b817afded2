#pragma once
// The drafter a drafter service runs, by name: "suffix" (the suffix drafter), a DFlash checkpoint
// directory, or "suffix+DIR" (the two combined, engine::CombinedDrafter).
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/engine/draft_session.h"
#include "common/io/qwen35_config.h"
#include "common/model/dflash_drafter.h"
#include "common/model/model_options.h"
#include "common/model/token_head.h"

namespace specd::drafter {

struct ServedDrafter {
  std::unique_ptr<engine::Drafter> drafter;
  // The DFlash drafter within `drafter`, if any (Info describes it), and its directory.
  const model::DFlashDrafter* dflash = nullptr;
  std::string checkpoint;
};

// Loads the drafter `source` names for the target of `target_config`. A DFlash drafter drafts
// through the target's embedding and head, which `head` gives (only such a drafter asks).
absl::StatusOr<ServedDrafter> OpenServedDrafter(
    const std::string& source, const io::Qwen35TextConfig& target_config,
    const model::ModelOptions& options,
    const std::function<absl::StatusOr<model::TokenHead>()>& head);

}  // namespace specd::drafter
