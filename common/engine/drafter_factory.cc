#include "common/engine/drafter_factory.h"

#include <utility>

#include "common/engine/dflash_block_drafter.h"
#include "common/engine/oracle_drafter.h"
#include "common/model/dflash_drafter.h"

namespace specd::engine {

absl::StatusOr<std::unique_ptr<Drafter>> OpenDrafter(const std::string& source,
                                                     const model::Qwen35Model& target,
                                                     int64_t oracle_block_size) {
  if (source == kOracleDrafter) {
    return std::make_unique<OracleDrafter>(
        target, oracle_block_size > 0 ? oracle_block_size : kDefaultOracleBlockSize);
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
