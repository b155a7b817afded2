#pragma once
// The drafter a command line names: "oracle" (the target's own greedy continuation), or the
// directory of a DFlash drafter checkpoint.
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/engine/draft_session.h"
#include "common/model/qwen35_model.h"

namespace specd::engine {

inline constexpr char kOracleDrafter[] = "oracle";
// The oracle's block size when none is given: the released DFlash drafters' (research/dflash.md
// §2.1).
inline constexpr int64_t kDefaultOracleBlockSize = 16;

// `oracle_block_size` (0: the default) sizes the oracle; a DFlash drafter has its own. `target`
// must outlive the result.
absl::StatusOr<std::unique_ptr<Drafter>> OpenDrafter(const std::string& source,
                                                     const model::Qwen35Model& target,
                                                     int64_t oracle_block_size = 0);

}  // namespace specd::engine
