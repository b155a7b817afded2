#include "common/engine/drafter_factory.h"

#include <string_view>
#include <utility>

#include "common/engine/combined_drafter.h"
#include "common/engine/dflash_block_drafter.h"
#include "common/engine/oracle_drafter.h"
#include "common/engine/suffix_drafter.h"
#include "common/model/dflash_drafter.h"

namespace specd::engine {

DrafterSource ParseDrafterSource(const std::string& source) {
  if (source == kSuffixDrafter) return {.suffix = true, .model = ""};
  if (source.starts_with(kCombinedDrafterPrefix)) {
    return {.suffix = true,
            .model = source.substr(std::string_view(kCombinedDrafterPrefix).size())};
  }
  return {.suffix = false, .model = source};
}

absl::StatusOr<std::unique_ptr<Drafter>> OpenDrafter(const std::string& source,
                                                     const model::Qwen35Model& target,
                                                     int64_t model_free_block_size) {
  const int64_t block_size =
      model_free_block_size > 0 ? model_free_block_size : kDefaultModelFreeBlockSize;
  const DrafterSource parsed = ParseDrafterSource(source);
  if (parsed.model.empty()) return std::make_unique<SuffixDrafter>(block_size);
  std::unique_ptr<Drafter> model;
  if (parsed.model == kOracleDrafter) {
    model = std::make_unique<OracleDrafter>(target, block_size);
  } else {
    absl::StatusOr<model::DFlashDrafter> drafter =
        model::DFlashDrafter::Load(parsed.model, target.options());
    if (!drafter.ok()) return drafter.status();
    absl::StatusOr<std::unique_ptr<DFlashBlockDrafter>> block =
        DFlashBlockDrafter::Create(*std::move(drafter), target.token_head(), target.config());
    if (!block.ok()) return block.status();
    model = *std::move(block);
  }
  if (parsed.suffix) return std::make_unique<CombinedDrafter>(std::move(model));
  return model;
}

}  // namespace specd::engine
