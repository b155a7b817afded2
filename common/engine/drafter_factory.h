#pragma once
// The drafter a command line names: "oracle" (the target's own greedy continuation), or the
// directory of a DFlash drafter checkpoint.
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/model/qwen35_model.h"
#include "common/engine/block_drafter.h"
#include "common/engine/dflash_block_drafter.h"

namespace specd::engine {

inline constexpr char kOracleDrafter[] = "oracle";
// The oracle's block size when none is given: the released DFlash drafters' (research/dflash.md
// §2.1).
inline constexpr int64_t kDefaultOracleBlockSize = 16;

// `options` beyond block_size apply to DFlash drafters only. `target` must outlive the result.
absl::StatusOr<std::unique_ptr<BlockDrafter>> OpenBlockDrafter(const std::string& source,
                                                               const model::Qwen35Model& target,
                                                               const DFlashBlockOptions& options);

}  // namespace specd::engine
