#include "common/engine/drafter_factory.h"

#include <utility>

#include "common/model/dflash_drafter.h"
#include "common/engine/oracle_drafter.h"

namespace specd::engine {

absl::StatusOr<std::unique_ptr<BlockDrafter>> OpenBlockDrafter(const std::string& source,
                                                               const model::Qwen35Model& target,
                                                               const DFlashBlockOptions& options) {
  if (source == kOracleDrafter) {
    if (options.window != 0 || options.min_confidence != 0) {
      return absl::InvalidArgumentError(
          "a draft window and adaptive draft length apply to DFlash drafters, not the oracle");
    }
    const int64_t block_size =
        options.block_size > 0 ? options.block_size : kDefaultOracleBlockSize;
    return std::make_unique<OracleDrafter>(target, block_size);
  }
  absl::StatusOr<model::DFlashDrafter> drafter =
      model::DFlashDrafter::Load(source, target.options());
  if (!drafter.ok()) return drafter.status();
  absl::StatusOr<std::unique_ptr<DFlashBlockDrafter>> block = DFlashBlockDrafter::Create(
      *std::move(drafter), target.token_head(), target.config(), options);
  if (!block.ok()) return block.status();
  return std::unique_ptr<BlockDrafter>(*std::move(block));
}

}  // namespace specd::engine
