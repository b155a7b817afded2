#include "common/engine/drafter_factory.h"

#include <string_view>
#include <utility>

#include "common/engine/combined_drafter.h"
#include "common/engine/dflash_block_drafter.h"
#include "common/engine/oracle_drafter.h"
#include "common/engine/suffix_drafter.h"
#include "common/model/dflash_drafter.h"

namespace specd::engine {

absl::StatusOr<std::unique_ptr<Drafter>> OpenDrafter(const std::string& source,
                                                     const model::Qwen35Model& target,
                                                     int64_t model_free_block_size) {
  const int64_t block_size =
      model_free_block_size > 0 ? model_free_block_size : kDefaultModelFreeBlockSize;
  if (source == kOracleDrafter) return std::make_unique<OracleDrafter>(target, block_size);
  if (source == kSuffixDrafter) return std::make_unique<SuffixDrafter>(block_size);
  if (source.starts_with(kCombinedDrafterPrefix)) {
    absl::StatusOr<std::unique_ptr<Drafter>> model = OpenDrafter(
        source.substr(std::string_view(kCombinedDrafterPrefix).size()), target, block_size);
    if (!model.ok()) return model.status();
    return std::make_unique<CombinedDrafter>(*std::move(model));
  }
  absl::StatusOr<model::DFlashDrafter> drafter =
      model::DFlashDrafter::Load(source, target.options());
  if (!drafter.ok()) return drafter.status();
  absl::StatusOr<std::unique_ptr<DFlashBlockDrafter>> block =
      DFlashBlockDrafter::Create(*std::move(drafter), target.token_head(), target.config());
  if (!block.ok()) return block.status();
  return std::unique_ptr<Drafter>(*std::move(block));
}

}  // namespace specd::engine
