#pragma once
// A drafter head over a pruned vocabulary (issue 20): the K tokens a drafter's training data
// trains it to produce most often. The drafter then scores K rows of the target's head instead of
// all of them; verification keeps the full head, so a token outside the K costs acceptance only.
// The checkpoint records it as EAGLE-3 does: `draft_vocab_size` in config.json and `d2t`
// (int64 [K]: draft id i is target id i + d2t[i]) beside the weights.
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "training/packed_dataset.h"

namespace specd::train {

struct DraftVocabulary {
  std::vector<int64_t> ids;  // ascending
  double coverage = 0;       // the share of the counted tokens that are among them
};

// The `keep` ids that occur most often where the datasets' training splits have loss (the tokens
// a model learns to produce), ties to the smaller id. INVALID_ARGUMENT for `keep` outside
// [1, vocabulary] or datasets of different vocabularies.
absl::StatusOr<DraftVocabulary> MostFrequentTokens(std::span<const PackedDataset> data,
                                                   int64_t keep);

// Writes the DFlash drafter in `drafter` to `out` (created; must be empty if it exists) with its
// head pruned to `vocab` (ascending target ids): its tensors, `d2t`, its config with
// draft_vocab_size, and its side files.
absl::Status WritePrunedDrafter(const std::filesystem::path& drafter,
                                std::span<const int64_t> vocab, const std::filesystem::path& out);

}  // namespace specd::train
