#pragma once
// The drafter a command line names: "oracle" (the target's own greedy continuation), "suffix"
// (the sequence's own earlier continuations, suffix_drafter.h), the directory of a DFlash
// drafter checkpoint, or "suffix+" and that directory (the two combined, combined_drafter.h).
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/engine/draft_session.h"
#include "common/model/qwen35_model.h"

namespace specd::engine {

inline constexpr char kOracleDrafter[] = "oracle";
inline constexpr char kSuffixDrafter[] = "suffix";
inline constexpr char kCombinedDrafterPrefix[] = "suffix+";
// The oracle's and the suffix drafter's block size when none is given: the released DFlash
// drafters' (research/dflash.md §2.1).
inline constexpr int64_t kDefaultModelFreeBlockSize = 16;

// A drafter's name split: whether it has the suffix drafter (alone or combined), and its model
// drafter's source (the oracle or a DFlash checkpoint directory; empty: none).
struct DrafterSource {
  bool suffix = false;
  std::string model;
};
DrafterSource ParseDrafterSource(const std::string& source);

// `model_free_block_size` (0: the default) sizes the oracle and the suffix drafter; a DFlash
// drafter has its own. `target` must outlive the result.
absl::StatusOr<std::unique_ptr<Drafter>> OpenDrafter(const std::string& source,
                                                     const model::Qwen35Model& target,
                                                     int64_t model_free_block_size = 0);

}  // namespace specd::engine
