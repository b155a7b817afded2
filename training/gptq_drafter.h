#pragma once
// GPTQ W4A16 of a trained DFlash drafter, Nota's recipe (research/dflash.md §6.6) run through
// the serving path: per calibration sequence the frozen target's tapped hidden states are the
// context; at anchors spread evenly over the assistant's tokens the context up to each anchor is
// appended to one DFlashCache (each row passes fc and the k/v projections once, as in serving)
// and the block [anchor, MASK × (B − 1)] is drafted; every drafter Linear's inputs accumulate its
// Hessian, and the drafter is written GPTQ-quantized as compressed-tensors pack-quantized.
#include <cstdint>
#include <filesystem>

#include "absl/status/status.h"
#include "common/quantize/gptq.h"

namespace specd::train {

struct GptqDrafterOptions {
  std::filesystem::path target;   // the target the drafter serves (its features calibrate)
  std::filesystem::path drafter;  // the trained dense drafter
  std::filesystem::path data;     // packed dataset; calibration reads its training split
  std::filesystem::path out;      // the W4A16 drafter (created; must be empty if it exists)
  int64_t sequences = 256;        // spread evenly over the training split
  int64_t anchors_per_sequence = 16;
  quant::GptqOptions gptq = {};  // Nota: group 128, symmetric, damp 0.01
};

// Refuses, before any calibration, a group size that does not divide some Linear's input width
// (the caller picks one that fits), a drafter that does not fit the target, and data in which no
// sequence has an assistant token with room for a block.
absl::Status RunGptqDrafter(const GptqDrafterOptions& options);

}  // namespace specd::train
