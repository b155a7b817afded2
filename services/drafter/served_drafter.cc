#include "services/drafter/served_drafter.h"

#include <utility>

#include "common/engine/combined_drafter.h"
#include "common/engine/dflash_block_drafter.h"
#include "common/engine/drafter_factory.h"
#include "common/engine/suffix_drafter.h"

namespace specd::drafter {

absl::StatusOr<ServedDrafter> OpenServedDrafter(
    const std::string& source, const io::Qwen35TextConfig& target_config,
    const model::ModelOptions& options,
    const std::function<absl::StatusOr<model::TokenHead>()>& head) {
  const engine::DrafterSource parsed = engine::ParseDrafterSource(source);
  if (parsed.model.empty()) {
    return ServedDrafter{
        .drafter = std::make_unique<engine::SuffixDrafter>(engine::kDefaultModelFreeBlockSize),
        .dflash = nullptr,
        .checkpoint = ""};
  }
  if (parsed.model == engine::kOracleDrafter) {
    return absl::InvalidArgumentError(
        "the oracle drafter runs the target itself: it drafts in `specd generate` and `specd "
        "bench spec` only");
  }
  absl::StatusOr<model::DFlashDrafter> loaded = model::DFlashDrafter::Load(parsed.model, options);
  if (!loaded.ok()) return loaded.status();
  absl::StatusOr<model::TokenHead> target_head = head();
  if (!target_head.ok()) return target_head.status();
  absl::StatusOr<std::unique_ptr<engine::DFlashBlockDrafter>> dflash =
      engine::DFlashBlockDrafter::Create(*std::move(loaded), *std::move(target_head),
                                         target_config);
  if (!dflash.ok()) return dflash.status();
  ServedDrafter served{
      .drafter = nullptr, .dflash = &(*dflash)->model(), .checkpoint = parsed.model};
  if (parsed.suffix) {
    served.drafter = std::make_unique<engine::CombinedDrafter>(*std::move(dflash));
  } else {
    served.drafter = *std::move(dflash);
  }
  return served;
}

}  // namespace specd::drafter
